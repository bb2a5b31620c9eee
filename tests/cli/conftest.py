"""Running the `ctxbudget` command in tests: in process through `main`."""

from __future__ import annotations

import pytest

from ctxbudget.__main__ import main
from tests.support.cli import Ran, Run


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """`main([...])` in this process, with its output captured."""

    def run(*args: str) -> Ran:
        code = main(list(args))
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
