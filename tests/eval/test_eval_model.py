"""The model under test: the disk cache, and the LangChain and LlamaIndex adapters (real ones)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.llms import MockLLM

from ctxbudget.eval import EvalError, Model, cached, from_langchain, from_llamaindex
from tests.support.eval_recorder import Recorder


def test_cached_answers_a_repeated_prompt_from_disk(tmp_path: Path) -> None:
    model = Recorder(lambda p: f"answer to {p}")
    first = cached(model, tmp_path, model_id="m1")
    assert [first("a"), first("b")] == ["answer to a", "answer to b"]
    again = cached(model, tmp_path, model_id="m1")  # a new run, the same directory
    assert [again("a"), again("b")] == ["answer to a", "answer to b"]
    assert model.prompts == ["a", "b"]


def test_cached_keeps_models_apart(tmp_path: Path) -> None:
    one, two = Recorder(lambda p: "one"), Recorder(lambda p: "two")
    assert cached(one, tmp_path, model_id="m1")("a") == "one"
    assert cached(two, tmp_path, model_id="m2")("a") == "two"
    assert two.prompts == ["a"]


def test_cached_takes_the_id_of_a_model(tmp_path: Path) -> None:
    model = cached(Model(lambda p: "x", model_id="langchain:Fake"), tmp_path / "new" / "dir")
    assert model.model_id == "langchain:Fake"
    assert (tmp_path / "new" / "dir" / "answers.sqlite3").is_file()


def test_cached_needs_an_id_for_a_plain_function(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match=r"cached\(\) needs model_id=\.\.\. for a plain function"):
        cached(lambda p: "x", tmp_path)


def test_cached_rejects_an_answer_that_is_not_text(tmp_path: Path) -> None:
    model = cached(lambda p: 42, tmp_path, model_id="m")  # type: ignore[arg-type,return-value]
    with pytest.raises(EvalError, match="function answered with int, not text"):
        model("a")


def test_cached_does_not_store_a_failed_call(tmp_path: Path) -> None:
    calls: list[str] = []

    def flaky(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) == 1:
            raise TimeoutError("rate limited")
        return "ok"

    model = cached(flaky, tmp_path, model_id="m")
    with pytest.raises(TimeoutError):
        model("a")
    assert model("a") == "ok"
    assert calls == ["a", "a"]


def test_from_langchain_sends_the_prompt_and_returns_the_text() -> None:
    chat = GenericFakeChatModel(messages=iter(["14 days [1]"]))
    model = from_langchain(chat)
    assert model("How long?") == "14 days [1]"
    assert model.model_id == "langchain:GenericFakeChatModel"


def test_from_langchain_joins_text_blocks() -> None:
    blocks = [{"type": "text", "text": "14 "}, {"type": "text", "text": "days"}]
    chat = GenericFakeChatModel(messages=iter([AIMessage(content=blocks)]))  # type: ignore[arg-type]
    assert from_langchain(chat)("How long?") == "14 days"


def test_from_langchain_accepts_an_llm_returning_a_string() -> None:
    class FakeLLM:
        model_name = "tiny-1"

        def invoke(self, prompt: str) -> str:
            return prompt.upper()

    model = from_langchain(FakeLLM())
    assert (model("abc"), model.model_id) == ("ABC", "langchain:FakeLLM:tiny-1")


def test_from_langchain_model_id_can_be_given() -> None:
    chat = GenericFakeChatModel(messages=iter([]))
    assert from_langchain(chat, model_id="gpt-4o@t0").model_id == "gpt-4o@t0"


def test_from_langchain_rejects_an_object_without_invoke() -> None:
    with pytest.raises(TypeError, match=r"MockLLM has no invoke\(\); .* use from_llamaindex"):
        from_langchain(MockLLM())


def test_from_langchain_rejects_a_reply_without_text() -> None:
    class Odd:
        def invoke(self, prompt: str) -> object:
            return 3

    with pytest.raises(EvalError, match="Odd answered with int, not text"):
        from_langchain(Odd())("q")


def test_from_llamaindex_completes_the_prompt() -> None:
    model = from_llamaindex(MockLLM())  # MockLLM echoes the prompt
    assert model("What is in locker 4417?") == "What is in locker 4417?"
    assert model.model_id == "llama_index:MockLLM:unknown"


def test_from_llamaindex_rejects_an_object_without_complete() -> None:
    chat = GenericFakeChatModel(messages=iter([]))
    with pytest.raises(TypeError, match=r"has no complete\(\); .* use from_langchain"):
        from_llamaindex(chat)


def test_adapters_import_no_framework() -> None:
    import ctxbudget.eval._model as module

    assert "langchain" not in module.__dict__
    assert "llama_index" not in module.__dict__
