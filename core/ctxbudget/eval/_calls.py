"""Asking the model: each distinct prompt once, on a bounded thread pool, with a progress bar.

Answers come back in prompt order whatever order the calls finish in. The first
exception stops the run (pending calls are cancelled) and is raised as it was; with
`cached`, the answers already received are kept, so a re-run resumes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from importlib.util import find_spec
from typing import Final, TextIO

from ctxbudget.eval._errors import EvalError

__all__ = ["LONG_RUN", "answer_all", "check_workers", "show_progress"]

LONG_RUN: Final = 20
"""Calls from which a run counts as long: the progress bar is shown (on a terminal)."""


def check_workers(workers: object) -> int:
    """`workers` when it is an int >= 1; `EvalError` otherwise."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise EvalError(f"workers must be an int >= 1, but got {workers!r}")
    return workers


def show_progress(progress: bool | None, calls: int, stream: TextIO) -> bool:
    """Whether to draw a progress bar: as asked, else on long runs to a terminal when rich
    is installed."""
    if progress is not None:
        return progress
    return calls >= LONG_RUN and stream.isatty() and find_spec("rich") is not None


def answer_all(
    generate: Callable[[str], str],
    prompts: Sequence[str],
    *,
    workers: int,
    progress: bool | None,
) -> list[str]:
    """The answer to each of `prompts`, in order; a prompt given twice is asked once."""
    unique = list(dict.fromkeys(prompts))
    answers: dict[str, str] = {}
    with (
        _bar(show_progress(progress, len(unique), sys.stderr), len(unique)) as advance,
        ThreadPoolExecutor(max_workers=min(check_workers(workers), max(len(unique), 1))) as pool,
    ):
        futures = {pool.submit(generate, p): p for p in unique}
        order = {future: index for index, future in enumerate(futures)}
        pending: set[Future[str]] = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            # In prompt order: of the calls that failed together, the earliest is raised.
            for future in sorted(done, key=order.__getitem__):
                if future.exception() is not None:
                    for other in pending:
                        other.cancel()
                answers[futures[future]] = _checked(future.result(), generate)
                advance()
    return [answers[p] for p in prompts]


def _checked(answer: object, generate: object) -> str:
    if not isinstance(answer, str):
        name = getattr(generate, "__qualname__", type(generate).__name__)
        raise EvalError(
            f"{name} returned {type(answer).__name__}, not text; a generate function must "
            "return the answer as a str (wrap a chat model with from_langchain or from_llamaindex)"
        )
    return answer


@contextmanager
def _bar(show: bool, total: int) -> Iterator[Callable[[], None]]:
    if not show:
        yield lambda: None
        return
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        raise ImportError(
            "the progress bar needs rich: pip install 'ctxbudget[eval]', or pass progress=False"
        ) from None
    with Progress(console=Console(file=sys.stderr)) as bar:
        task = bar.add_task("asking the model", total=total)
        yield lambda: bar.advance(task)
