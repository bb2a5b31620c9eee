"""`ctxbudget count -` and `count` in a pipe (core/ctxbudget/_cli/count.py): standard input,
read as wc reads it."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbudget import get_tokenizer
from tests.support.cli import Run

TEXT = "Refunds are paid within 5 business days of receiving the item."


class _Terminal(io.TextIOWrapper):
    """Standard input that is a terminal: nobody piped anything in."""

    def isatty(self) -> bool:
        return True


def feed(monkeypatch: pytest.MonkeyPatch, data: bytes, *, terminal: bool = False) -> None:
    stream = (_Terminal if terminal else io.TextIOWrapper)(io.BytesIO(data), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stream)


def test_count_dash_reads_standard_input(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    feed(monkeypatch, TEXT.encode())

    data = cli("count", "-", "--json").json()

    expected = get_tokenizer("gpt-4o").count(TEXT)
    assert data["files"] == [{"path": "-", "tokens": expected, "characters": len(TEXT)}]
    assert data["total"] == expected


def test_count_without_files_in_a_pipe_reads_standard_input(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, TEXT.encode())

    data = cli("count", "--json").json()

    assert data["files"][0]["path"] == "-"
    assert data["total"] == get_tokenizer("gpt-4o").count(TEXT)


def test_count_without_files_at_a_terminal_is_a_usage_error(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, b"", terminal=True)

    ran = cli("count")

    assert (ran.code, ran.out) == (2, "")
    assert ran.err == (
        "ctxbudget: give FILE..., or pipe the text in (or pass - to read standard input); "
        "see 'ctxbudget count --help'\n"
    )


def test_count_dash_beside_files_counts_each(
    cli: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "a.txt"
    path.write_text("# Hi\n", encoding="utf-8")
    feed(monkeypatch, TEXT.encode())

    data = cli("count", str(path), "-", "--json").json()

    assert [f["path"] for f in data["files"]] == [str(path), "-"]
    assert data["files"][1]["characters"] == len(TEXT)


def test_count_dash_twice_is_a_usage_error(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    feed(monkeypatch, TEXT.encode())

    ran = cli("count", "-", "-")

    assert (ran.code, ran.err) == (
        2,
        "ctxbudget: - (standard input) can be read once; give it once\n",
    )


def test_count_standard_input_not_utf8_says_so(cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    feed(monkeypatch, b"ok \xff")

    ran = cli("count", "-")

    assert (ran.code, ran.err) == (
        1,
        "ctxbudget: standard input is not UTF-8 text (byte 3 cannot be decoded); "
        "convert it to UTF-8\n",
    )


def test_count_standard_input_drops_a_byte_order_mark(
    cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    feed(monkeypatch, b"\xef\xbb\xbf" + TEXT.encode())

    assert cli("count", "-", "--json").json()["files"][0]["characters"] == len(TEXT)


def test_count_reads_a_pipe_in_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxbudget", "count", "-"],
        input=TEXT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[1].split() == [
        "-",
        str(get_tokenizer("gpt-4o").count(TEXT)),
        str(len(TEXT)),
    ]
