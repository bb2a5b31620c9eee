"""The context window an Ollama or vLLM server gives a model: its setting, not the model's.

An open-weight model's window is what its server was started or configured with (Ollama's
``num_ctx``, vLLM's ``--max-model-len``), so ctxbudget asks the server rather than assume the
model's trained length. One HTTP call per question (two for an Ollama model without
``num_ctx``), through httpx (the ``servers`` extra), imported only when asked.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import TYPE_CHECKING, Any, Final, Literal

from ctxbudget._errors import InvalidBudgetError

if TYPE_CHECKING:
    import httpx

__all__ = ["ServerKind", "server_window"]

ServerKind = Literal["ollama", "vllm"]
"""The servers `server_window` can ask."""

INSTALL: Final = "pip install 'ctxbudget[servers]'"

_NUM_CTX: Final = re.compile(r"^num_ctx\s+(\d+)\s*$", re.MULTILINE)
"""``num_ctx`` in the ``parameters`` text of Ollama's ``/api/show`` (one ``name value`` a line)."""

_OLLAMA_DEFAULT: Final = (
    "Ollama's default, which the server does not report: OLLAMA_CONTEXT_LENGTH if the server "
    "sets it, else 4k, 32k or 256k by VRAM (docs.ollama.com/context-length; 2048 before that)"
)

_FIX: Final = "or pass the window yourself (Budget.for_model(..., window=<tokens>))"


def server_window(
    base_url: str,
    model: str,
    *,
    kind: ServerKind,
    client: httpx.Client | None = None,
    timeout: float = 10.0,
) -> int:
    """The context window the server at `base_url` runs `model` with, in tokens, to pass as
    ``Budget.for_model(model, window=...)`` (docs/tokenizers.md, "Windows of Ollama and vLLM
    models").

    ``kind="ollama"``: the model's ``num_ctx`` from ``POST /api/show`` (at most its trained
    ``<arch>.context_length``); without one, the window Ollama allocated to it when loaded
    (``GET /api/ps``); a model with neither raises, since Ollama's default depends on the
    server's environment and memory, which it does not report. ``kind="vllm"``: the model's
    ``max_model_len`` from ``GET /v1/models``. Raises `InvalidBudgetError` saying what to change
    when the server cannot be asked or does not say. `client` is an `httpx.Client` of yours
    (headers, auth, a test transport); else one is made for the call with `timeout`.
    """
    if kind not in ("ollama", "vllm"):
        raise InvalidBudgetError(
            f"kind={kind!r} is not a server ctxbudget can ask: use 'ollama' or 'vllm'"
        )
    base = base_url.rstrip("/")
    if base.endswith("/v1"):  # an OpenAI-compatible base URL, as SDKs take it
        base = base[: -len("/v1")]
    if client is None:
        if importlib.util.find_spec("httpx") is None:
            raise InvalidBudgetError(
                f"asking a server for its context window needs httpx: {INSTALL}"
            )
        httpx_module: Any = importlib.import_module("httpx")
        with httpx_module.Client(timeout=timeout) as own:
            return _ask(own, base, model, kind)
    return _ask(client, base, model, kind)


def _ask(client: httpx.Client, base: str, model: str, kind: ServerKind) -> int:
    if kind == "vllm":
        return _vllm(client, base, model)
    return _ollama(client, base, model.removeprefix("ollama:"))


def _ollama(client: httpx.Client, base: str, model: str) -> int:
    where = f"the Ollama server at {base}"
    shown = _json(client, "POST", f"{base}/api/show", where, model, body={"model": model})
    info = shown.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = _positive(info.get(f"{info.get('general.architecture')}.context_length"))
    parameters = shown.get("parameters")
    set_to = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if set_to is not None:
        num_ctx = int(set_to.group(1))
        return num_ctx if trained is None else min(num_ctx, trained)
    running = _json(client, "GET", f"{base}/api/ps", where, model)
    names = {model, f"{model}:latest"} if ":" not in model else {model}
    for loaded in running.get("models") or []:
        if isinstance(loaded, dict) and {loaded.get("name"), loaded.get("model")} & names:
            window = _positive(loaded.get("context_length"))
            if window is not None:
                return window
    raise InvalidBudgetError(
        f"{where} runs {model!r} without num_ctx and has not loaded it, so its window is "
        f"{_OLLAMA_DEFAULT}; set num_ctx (in the model's Modelfile, or on every request and "
        f"then pass that window), load the model first, {_FIX}"
    )


def _vllm(client: httpx.Client, base: str, model: str) -> int:
    where = f"the vLLM server at {base}"
    listed = _json(client, "GET", f"{base}/v1/models", where, model)
    served = [entry for entry in listed.get("data") or [] if isinstance(entry, dict)]
    for entry in served:
        if entry.get("id") == model:
            window = _positive(entry.get("max_model_len"))
            if window is None:
                raise InvalidBudgetError(
                    f"{where} lists {model!r} without max_model_len (is it a vLLM server?); {_FIX}"
                )
            return window
    ids = ", ".join(repr(entry.get("id")) for entry in served) or "none"
    raise InvalidBudgetError(
        f"{where} does not serve {model!r} (it serves {ids}): pass the id as /v1/models lists "
        f"it (vLLM's --served-model-name), {_FIX}"
    )


def _json(
    client: httpx.Client,
    method: str,
    url: str,
    where: str,
    model: str,
    *,
    body: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The JSON object `url` answers, or a `InvalidBudgetError` saying why there is none."""
    try:
        response = client.request(method, url, json=body)
    except Exception as exc:  # httpx's transport errors; httpx itself may not be importable
        raise InvalidBudgetError(
            f"could not ask {where} for {model!r}'s context window ({type(exc).__name__}: {exc}): "
            f"check the base URL and that the server runs, {_FIX}"
        ) from exc
    if response.status_code == 404 and method == "POST":
        raise InvalidBudgetError(
            f"{where} has no model {model!r}: pull it (ollama pull {model}), {_FIX}"
        )
    if response.status_code >= 400:
        raise InvalidBudgetError(
            f"{where} answered {method} {url} with HTTP {response.status_code}; {_FIX}"
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise InvalidBudgetError(f"{where} answered {method} {url} with no JSON object; {_FIX}")
    return data


def _positive(value: object) -> int | None:
    """`value` when it is a window (an int above 0), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
