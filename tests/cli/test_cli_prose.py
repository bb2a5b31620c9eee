"""The tool's own prose wrapped to the width (core/ctxbudget/_cli/prose.py): help, errors at
a terminal, the view's notes and summary; the prompt itself is never wrapped."""

from __future__ import annotations

import io
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import _demo
from ctxbudget._cli.app import main
from ctxbudget._cli.prose import cells, wrap
from tests.support.cli import Run

WORDS = st.lists(
    st.text(st.sampled_from("ab文-/é"), min_size=1, max_size=12), min_size=0, max_size=30
)


class _TerminalErr(io.StringIO):
    """A stderr that is a terminal."""

    def isatty(self) -> bool:
        return True


@given(words=WORDS, width=st.integers(min_value=1, max_value=60))
def test_wrap_keeps_every_word_in_order(words: list[str], width: int) -> None:
    assert wrap(" ".join(words), width).split() == words


@given(words=WORDS, width=st.integers(min_value=1, max_value=60))
def test_wrap_lines_fit_unless_one_word_is_wider(words: list[str], width: int) -> None:
    for line in wrap(" ".join(words), width).split("\n"):
        assert cells(line) <= width or " " not in line
        assert line == line.strip()


def test_wrap_counts_wide_characters_as_two_cells() -> None:
    assert wrap("文書 文書 ab", 5) == "文書\n文書\nab"


def test_wrap_keeps_a_long_path_whole() -> None:
    assert wrap("read /a/very/long/path/name.txt now", 10) == (
        "read\n/a/very/long/path/name.txt\nnow"
    )


@pytest.mark.parametrize("argv", [["--help"], ["count", "--help"], ["demo", "--help"]])
def test_help_wraps_to_columns(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "50")

    assert main(argv) == 0

    # The usage block comes first: argparse keeps a bracketed option group whole there.
    prose = capsys.readouterr().out.split("\n\n", 1)[1]
    assert max(cells(line) for line in prose.splitlines()) <= 50


def test_error_at_a_terminal_wraps_to_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    err = _TerminalErr()
    monkeypatch.setattr(sys, "stderr", err)

    assert main(["demo", "--colour"]) == 2

    assert err.getvalue() == (
        "ctxbudget: unrecognized arguments:\n--colour; see 'ctxbudget --help'\n"
    )


def test_error_in_a_pipe_stays_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")

    assert main(["demo", "--colour"]) == 2

    assert capsys.readouterr().err == (
        "ctxbudget: unrecognized arguments: --colour; see 'ctxbudget --help'\n"
    )


def test_demo_note_in_a_pipe_wraps_at_100(cli: Run) -> None:
    shows = f"Shows: {_demo.PRESETS[0].shows}."

    out = cli("demo").out

    start = out.index("Shows: ")
    lines = out[start:].split("\n")[: len(wrap(shows, 100).split("\n"))]
    assert lines == wrap(shows, 100).split("\n")
    assert len(lines) > 1


def test_demo_at_a_terminal_wraps_notes_to_columns_but_not_the_prompt(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.setenv("NO_COLOR", "1")  # plain text at a terminal, so lines can be measured
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)

    out = cli("demo", "--preset", "budget").out

    assert wrap(f"Shows: {_demo.PRESETS[-1].shows}.", 60) in out
    assert wrap("Asking as: tenant acme, groups staff", 60) in out
    assert _demo.SYSTEM in out  # the prompt's lines stay whole, as the model reads them
