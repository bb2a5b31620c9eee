"""A model for the measurement harness's tests that records every prompt it was asked."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Recorder:
    """A model that records every prompt and answers with `answer(prompt)`."""

    def __init__(self, answer: Callable[[str], str] = lambda prompt: "no idea") -> None:
        self.prompts: list[str] = []
        self._answer = answer
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self._lock:
            self.prompts.append(prompt)
        return self._answer(prompt)
