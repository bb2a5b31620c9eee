"""The README and the manual cannot drift from the code: every example in them runs.

Each page's Python blocks run in order in one namespace, as a reader following that page
would run them, inside a temporary working directory: a page is self-contained. A TOML or
JSON block that describes a budget (it has `allocations`) must validate and assemble a
prompt. In bash blocks, our commands must parse (`ctxbudget ...`, `python -m ctxbudget`),
name extras that exist (`pip install '.[x]'`) and modules or scripts that exist
(`python -m benchmarks.x`, `python examples/x.py`). A block that cannot run is marked
``<!-- not-run: why -->`` on the line before it, and `NOT_RUN` names every such block.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxbudget import Budget, ContextAssembler
from ctxbudget._cli.app import parser
from ctxbudget.eval._cli import _parser as eval_parser
from tests.support.otel_spans import tracer_provider_restored

ROOT = Path(__file__).resolve().parent.parent
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

NOT_RUN: frozenset[str] = frozenset()
"""Blocks excluded on purpose, as `page:line`; empty while every example runs."""

LANGUAGES = frozenset({"python", "bash", "toml", "json", "text"})
"""Every fence names one of these, so no Python block hides under another name."""

_FENCE = re.compile(r"^( *)```(\w*)[^\n]*\n(.*?)^\1```", re.DOTALL | re.MULTILINE)
_NOT_RUN = re.compile(r"<!-- not-run: (.+?) -->\s*\Z")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it starts, its language, its text, why it is not run."""

    page: Path
    line: int
    language: str
    body: str
    not_run: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        before = _NOT_RUN.search(text[: match.start()])
        found.append(
            Block(
                page=page,
                line=text.count("\n", 0, match.start()) + 1,
                language=match.group(2),
                body=textwrap.dedent(match.group(3)),
                not_run=before.group(1) if before else None,
            )
        )
    return found


ALL = [block for page in PAGES for block in blocks(page)]
PYTHON_PAGES = sorted({b.page for b in ALL if b.language == "python"})


def of(language: str) -> list[Block]:
    return [block for block in ALL if block.language == language]


def test_every_fence_names_a_known_language() -> None:
    assert {b.name: b.language for b in ALL if b.language not in LANGUAGES} == {}


def test_readme_has_python_blocks() -> None:
    assert len([b for b in of("python") if b.page.name == "README.md"]) >= 3


def test_blocks_not_run_are_exactly_the_named_ones() -> None:
    excluded = {b.name: b.not_run for b in ALL if b.not_run is not None}
    assert set(excluded) == NOT_RUN, excluded


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_of_a_page_runs_in_order(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs"}
    # The tracing example sets the process's tracer provider: undone after, so the tests
    # that run later in this process record no spans.
    with tracer_provider_restored():
        for block in blocks(page):
            if block.language != "python" or block.not_run is not None:
                continue
            try:
                exec(compile(block.body, block.name, "exec"), namespace)
            except Exception as exc:  # pragma: no cover - the message is the point
                pytest.fail(f"{block.name} failed: {exc!r}\n{block.body}")


def _check_budget(data: object) -> None:
    if isinstance(data, dict) and "allocations" in data:
        budget = Budget.model_validate(data)
        result = ContextAssembler(tokenizer="o200k_base", budget=budget).assemble(
            question="Does the page's budget assemble a prompt?"
        )
        assert result.report.total <= budget.available


_DATA = of("toml") + of("json")


def test_docs_have_a_budget_file_block() -> None:
    assert _DATA


@pytest.mark.parametrize("block", _DATA, ids=lambda b: b.name)
def test_every_data_block_loads(block: Block) -> None:
    _check_budget(tomllib.loads(block.body) if block.language == "toml" else json.loads(block.body))


def _commands() -> list[tuple[str, list[str]]]:
    """Each command line of every bash block, split as the shell would (comments dropped)."""
    lines = []
    for block in of("bash"):
        for line in block.body.splitlines():
            for command in line.split("&&"):
                words = shlex.split(command, comments=True)
                if words:
                    lines.append((block.name, words))
    return lines


def _ours(words: list[str]) -> list[str] | None:
    """The arguments of a `ctxbudget` command, however it is started, else None."""
    if Path(words[0]).name == "ctxbudget":
        return words[1:]
    if Path(words[0]).name.startswith("python") and words[1:3] == ["-m", "ctxbudget"]:
        return words[3:]
    return None


def test_every_ctxbudget_command_parses() -> None:
    checked = 0
    for _, words in _commands():
        args = _ours(words)
        if args is None:
            continue
        if args[:1] == ["eval"]:
            eval_parser("ctxbudget eval").parse_args(args[1:])
        else:
            parser().parse_args(args or ["demo"])
        checked += 1
    assert checked


_EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]


def test_every_pip_install_names_extras_that_exist() -> None:
    named = {
        extra
        for _, words in _commands()
        if Path(words[0]).name == "pip" and words[1:2] == ["install"]
        for word in words[2:]
        for extra in re.findall(r"\[([\w,]+)\]", word)[:1]
    }
    extras = {extra for group in named for extra in group.split(",")}
    assert extras
    assert extras - set(_EXTRAS) == set()


def test_every_module_and_script_a_command_runs_exists() -> None:
    missing = []
    for name, words in _commands():
        if not Path(words[0]).name.startswith("python"):
            continue
        if words[1:2] == ["-m"] and words[2] != "venv":
            if importlib.util.find_spec(words[2]) is None:
                missing.append((name, words[2]))
        elif len(words) > 1 and words[1].endswith(".py") and not (ROOT / words[1]).is_file():
            missing.append((name, words[1]))
    assert missing == []


_LINK = re.compile(r"\]\(((?:docs/|\.\./)?[\w/.-]+\.md)(#[\w-]+)?\)")


def test_readme_links_into_the_docs_resolve() -> None:
    links = _LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links
    assert [path for path, _ in links if not (ROOT / path).is_file()] == []


def test_ci_finds_the_test_command_between_its_markers() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    between = text.split("<!-- test-command -->", 1)[1].split("<!-- /test-command -->", 1)[0]
    commands = [line.strip() for line in between.splitlines() if line.startswith("python3 ")]
    assert commands
    assert commands[0].endswith(".venv/bin/nox")  # every session of noxfile.py


def _marked(text: str, marker: str) -> str:
    return text.split(f"<!-- {marker} -->", 1)[1].split(f"<!-- /{marker} -->", 1)[0].strip()


def test_install_page_gives_the_readme_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    for marker in ("demo-command", "test-command"):
        assert _marked(readme, marker) in install
