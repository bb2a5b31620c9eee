"""Calling the model: each prompt once, a bounded pool, answers in order, a progress bar."""

from __future__ import annotations

import io
import sys
import threading
import time

import pytest

from ctxbudget.eval import EvalError
from ctxbudget.eval._calls import LONG_RUN, answer_all, check_workers, show_progress
from tests.support.eval_recorder import Recorder


def test_answers_come_back_in_prompt_order() -> None:
    def slow_first(prompt: str) -> str:
        if prompt == "p0":
            time.sleep(0.05)  # finishes last; its answer must still come first
        return prompt.upper()

    prompts = [f"p{i}" for i in range(6)]
    answers = answer_all(slow_first, prompts, workers=3, progress=False)
    assert answers == [p.upper() for p in prompts]


def test_a_repeated_prompt_is_asked_once() -> None:
    model = Recorder(lambda p: p + "!")
    assert answer_all(model, ["a", "b", "a"], workers=2, progress=False) == ["a!", "b!", "a!"]
    assert sorted(model.prompts) == ["a", "b"]


def test_no_more_calls_run_at_once_than_workers() -> None:
    running, peak = 0, 0
    lock = threading.Lock()

    def model(prompt: str) -> str:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.01)
        with lock:
            running -= 1
        return prompt

    answer_all(model, [str(i) for i in range(12)], workers=3, progress=False)
    assert 1 <= peak <= 3


def test_the_first_error_stops_the_run_and_is_raised() -> None:
    asked: list[str] = []

    def model(prompt: str) -> str:
        asked.append(prompt)
        raise ConnectionError(f"down at {prompt}")

    with pytest.raises(ConnectionError, match="down at 0"):
        answer_all(model, [str(i) for i in range(50)], workers=1, progress=False)
    assert len(asked) < 50  # pending calls were cancelled


def test_an_answer_that_is_not_text_is_an_error() -> None:
    def model(prompt: str) -> str:
        return None  # type: ignore[return-value]

    with pytest.raises(EvalError, match=r"model returned NoneType, not text; .*from_langchain"):
        answer_all(model, ["a"], workers=1, progress=False)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "4"])
def test_workers_must_be_a_positive_int(workers: object) -> None:
    with pytest.raises(EvalError, match="workers must be an int >= 1"):
        check_workers(workers)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_shown_as_asked() -> None:
    assert show_progress(True, 1, io.StringIO()) is True
    assert show_progress(False, 1_000, _Terminal()) is False


def test_progress_is_shown_on_long_runs_to_a_terminal() -> None:
    assert show_progress(None, LONG_RUN, _Terminal()) is True
    assert show_progress(None, LONG_RUN - 1, _Terminal()) is False
    assert show_progress(None, LONG_RUN, io.StringIO()) is False


def test_progress_is_off_without_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ctxbudget.eval._calls.find_spec", lambda name: None)
    assert show_progress(None, LONG_RUN, _Terminal()) is False


def test_progress_bar_draws_to_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    assert answer_all(str.upper, ["a", "b"], workers=2, progress=True) == ["A", "B"]
    assert "asking the model" in stderr.getvalue()


def test_progress_bar_without_rich_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rich.progress", None)
    with pytest.raises(ImportError, match=r"needs rich: pip install 'ctxbudget\[eval\]'"):
        answer_all(str.upper, ["a"], workers=1, progress=True)
