"""The model under test: any prompt -> answer function, framework adapters, and a disk cache.

The adapters duck-type (a LangChain chat model has ``invoke``, a LlamaIndex LLM has
``complete``), so nothing here imports a framework. The cache keys each answer by the
prompt's sha256 and the model's id: a re-run with the same prompts and model makes no call.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxbudget.eval._errors import EvalError

__all__ = ["Model", "cached", "from_langchain", "from_llamaindex"]


@dataclass(frozen=True)
class Model:
    """A prompt -> answer function with the id its cached answers are stored under."""

    call: Callable[[str], str]
    model_id: str

    def __call__(self, prompt: str) -> str:
        return self.call(prompt)


def from_langchain(model: Any, *, model_id: str | None = None) -> Model:
    """A LangChain chat model (or LLM) as a generate function: the prompt is sent as one
    user message and the reply's text returned.

    `model_id` defaults to the class name and the model's ``model_name``/``model``, e.g.
    ``"langchain:ChatOpenAI:gpt-4o"``: set it when two configurations share a name.
    """
    invoke = getattr(model, "invoke", None)
    if not callable(invoke):
        raise TypeError(
            f"{type(model).__name__} has no invoke(); pass a LangChain chat model or LLM, or "
            "use from_llamaindex() for a LlamaIndex LLM"
        )

    def call(prompt: str) -> str:
        reply = invoke(prompt)
        return _text(reply if isinstance(reply, str) else getattr(reply, "text", reply), model)

    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return Model(
        call, model_id=_model_id("langchain", model, name) if model_id is None else model_id
    )


def from_llamaindex(llm: Any, *, model_id: str | None = None) -> Model:
    """A LlamaIndex LLM as a generate function: ``llm.complete(prompt).text``.

    `model_id` defaults to the class name and ``llm.metadata.model_name``.
    """
    complete = getattr(llm, "complete", None)
    if not callable(complete):
        raise TypeError(
            f"{type(llm).__name__} has no complete(); pass a LlamaIndex LLM, or use "
            "from_langchain() for a LangChain chat model"
        )

    def call(prompt: str) -> str:
        return _text(getattr(complete(prompt), "text", None), llm)

    name = getattr(getattr(llm, "metadata", None), "model_name", None)
    return Model(
        call, model_id=_model_id("llama_index", llm, name) if model_id is None else model_id
    )


def cached(
    generate: Callable[[str], str], directory: str | Path, *, model_id: str | None = None
) -> Model:
    """`generate` with its answers kept in ``<directory>/answers.sqlite3``, keyed by the
    prompt's sha256 and `model_id`: a prompt asked before is answered from disk.

    `model_id` defaults to `generate.model_id` (a `Model` from `from_langchain`, the
    simulator); a plain function needs one, so two models never share answers. Safe to
    share between threads and processes. Delete the file to start over.
    """
    if model_id is None:
        model_id = getattr(generate, "model_id", None)
        if not isinstance(model_id, str):
            raise EvalError(
                "cached() needs model_id=... for a plain function: answers are stored per "
                "model, so give each model (and each setting that changes its answers) its own id"
            )
    store = Path(directory).expanduser()
    store.mkdir(parents=True, exist_ok=True)
    path = store / "answers.sqlite3"
    with _connect(path) as db, db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS answers (model TEXT NOT NULL, prompt_sha256 TEXT NOT NULL, "
            "answer TEXT NOT NULL, PRIMARY KEY (model, prompt_sha256))"
        )
    key = model_id  # narrowed to str for the closure

    def call(prompt: str) -> str:
        digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        with _connect(path) as db:
            row = db.execute(
                "SELECT answer FROM answers WHERE model = ? AND prompt_sha256 = ?", (key, digest)
            ).fetchone()
        if row is not None:
            return str(row[0])
        answer = _text(generate(prompt), generate)
        with _connect(path) as db, db:
            db.execute("INSERT OR REPLACE INTO answers VALUES (?, ?, ?)", (key, digest, answer))
        return answer

    return Model(call, model_id=model_id)


def _connect(path: Path) -> closing[sqlite3.Connection]:
    return closing(sqlite3.connect(path, timeout=60))


def _text(value: object, source: object) -> str:
    if not isinstance(value, str):
        raise EvalError(
            f"{type(source).__name__} answered with {type(value).__name__}, not text; a generate "
            "function must return the answer as a str"
        )
    return value


def _model_id(framework: str, model: object, name: object) -> str:
    """``framework:Class:name``, or ``framework:Class`` when the model names no model."""
    parts = [framework, type(model).__name__]
    return ":".join([*parts, name] if isinstance(name, str) and name else parts)
