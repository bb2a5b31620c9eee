"""Citations of the manual resolve: the code, tests, benchmarks and examples cite a page and
a heading in one form, ``docs/budget.md, "How space is shared"`` (or ``README.md, "Install"``,
``benchmarks/README.md, "<heading>"``), and each cited page and heading exists.

The manual moves between pages as it grows; a citation left behind points a reader at
nothing. A page alone (``docs/inputs.md``) cites the whole page.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).parents[1]
TREES = ("core", "langchain_ctxbudget", "llamaindex_ctxbudget", "benchmarks", "examples", "tests")
SUFFIXES = (".py", ".toml")

CITATION = re.compile(
    r'(?<![\w/.-])(?P<page>(?:docs/[\w/-]+|(?:benchmarks/)?README)\.md)(?:,[\s#]+"(?P<heading>[^"]+)")?'
)
# The form the manual was cited in before it left the README: `README "Inputs"`,
# `the README, "The budget"`, `README ("Agents and chat")`.
OLD_FORM = re.compile(r'\bREADME(?:\'s)?(?: rule)?,?\s+\(?"')
_WRAP = re.compile(r"\s*\n\s*(?:#\s*)?")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)(?:\s+\{[^}]*\})?\s*#*\s*$")


class Citation(NamedTuple):
    """One citation as written: the file and line it is on, the page and the heading (or None)."""

    path: Path
    line: int
    page: str
    heading: str | None


def cited_in(path: Path) -> list[Citation]:
    """Every citation in the file at `path`, a heading wrapped over lines (and comment marks)
    read as one line."""
    text = path.read_text(encoding="utf-8")
    return [
        Citation(
            path,
            text.count("\n", 0, match.start()) + 1,
            match["page"],
            None if match["heading"] is None else _WRAP.sub(" ", match["heading"]).strip(),
        )
        for match in CITATION.finditer(text)
    ]


def headings(page: Path) -> set[str]:
    """The headings of a markdown page, as written, outside code blocks."""
    found, in_code = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            in_code = not in_code
        elif not in_code and (heading := _HEADING.match(line)):
            found.add(heading[1])
    return found


def unresolved(citations: list[Citation], root: Path = ROOT) -> list[str]:
    """The citations whose page or heading does not exist under `root`, one line each."""
    missing = []
    for citation in citations:
        where = f"{citation.path}:{citation.line}"
        page = root / citation.page
        if not page.is_file():
            missing.append(f"{where}: no page {citation.page}")
        elif citation.heading is not None and citation.heading not in headings(page):
            missing.append(f'{where}: no heading "{citation.heading}" in {citation.page}')
    return missing


def _sources() -> list[Path]:
    return sorted(
        path
        for tree in TREES
        for path in (ROOT / tree).rglob("*")
        if path.suffix in SUFFIXES and path.is_file() and path != Path(__file__)
    )


def _all_citations() -> list[Citation]:
    return [citation for path in _sources() for citation in cited_in(path)]


def test_every_cited_page_and_heading_exists() -> None:
    assert unresolved(_all_citations()) == []


def test_the_scan_reads_the_trees_citations() -> None:
    found = {(c.path.relative_to(ROOT).as_posix(), c.page, c.heading) for c in _all_citations()}
    assert ("core/ctxbudget/_exact.py", "docs/budget.md", "How space is shared") in found
    assert ("examples/budget.toml", "docs/budget.md", "The budget") in found
    assert len(found) > 50


def test_no_citation_of_the_manual_by_a_readme_section_name() -> None:
    old = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in _sources()
        for text in [path.read_text(encoding="utf-8")]
        for match in OLD_FORM.finditer(text)
    ]
    assert old == []


def test_the_scan_finds_a_broken_citation(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text(
        '"""Kept whole (docs/budget.md, "How space is shared"), cut (docs/budget.md, "How\n'
        '    space is lent")."""\n'
        '# Installed as README.md, "Install" says, read as docs/gone.md says, and as\n'
        '# docs/sources.md, "Hostile\n'
        '# content" says, and as docs/budget.md,\n'
        '# "The budget" says.\n',
        encoding="utf-8",
    )
    assert [(c.line, c.page, c.heading) for c in cited_in(module)] == [
        (1, "docs/budget.md", "How space is shared"),
        (1, "docs/budget.md", "How space is lent"),
        (3, "README.md", "Install"),
        (3, "docs/gone.md", None),
        (4, "docs/sources.md", "Hostile content"),
        (5, "docs/budget.md", "The budget"),
    ]
    assert unresolved(cited_in(module)) == [
        f'{module}:1: no heading "How space is lent" in docs/budget.md',
        f"{module}:3: no page docs/gone.md",
    ]


def test_the_old_form_is_found() -> None:
    cited = ['README "Inputs"', 'the README, "The budget"', 'README ("Agents and chat")']
    assert [bool(OLD_FORM.search(text)) for text in [*cited, 'README.md, "Install"']] == [
        True,
        True,
        True,
        False,
    ]


def test_headings_leave_out_comments_in_code_blocks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```python\n# a comment\n```\n\n## A section {#anchor}\n")
    assert headings(page) == {"Title", "A section"}
