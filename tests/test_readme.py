"""The README cannot drift from the code: every Python block runs, every TOML/JSON block loads.

Python blocks run in order in one namespace, as a reader following the README would run
them, inside a temporary working directory. A TOML or JSON block that describes a budget
(it has `allocations`) must also validate and assemble a prompt.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from ctxbudget import Budget, ContextAssembler
from tests.support.otel_spans import tracer_provider_restored

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(language: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    return [body for lang, body in _BLOCK.findall(text) if lang == language]


def test_readme_has_python_blocks() -> None:
    assert len(blocks("python")) >= 3


def test_every_python_block_runs_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "readme"}
    # The tracing example sets the process's tracer provider: undone after, so the tests
    # that run later in this process record no spans.
    with tracer_provider_restored():
        for index, body in enumerate(blocks("python")):
            try:
                exec(compile(body, f"README.md python block {index + 1}", "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the message is the point
                pytest.fail(f"README python block {index + 1} failed: {exc!r}\n{body}")


def _check_budget(data: object) -> None:
    if isinstance(data, dict) and "allocations" in data:
        budget = Budget.model_validate(data)
        result = ContextAssembler(tokenizer="o200k_base", budget=budget).assemble(
            question="Does the README's budget assemble a prompt?"
        )
        assert result.report.total <= budget.available


_DATA = [("toml", body) for body in blocks("toml")] + [("json", body) for body in blocks("json")]


def test_readme_has_a_budget_file_block() -> None:
    assert _DATA


@pytest.mark.parametrize(("language", "body"), _DATA)
def test_every_data_block_loads(language: str, body: str) -> None:
    _check_budget(tomllib.loads(body) if language == "toml" else json.loads(body))
