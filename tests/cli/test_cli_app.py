"""The `ctxbudget` command as a user meets it (core/ctxbudget/__main__.py, _cli/app.py):
--version, the default command, one-line errors with exit status 1 or 2, plain output.

Each command's own behaviour is in its own module beside this one.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from ctxbudget import Chunk, Turn
from ctxbudget.__main__ import main
from tests.support.imports import loaded_after

ESC = "\x1b"


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run(
        [sys.executable, "-m", "ctxbudget", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**environment, **env},
    )


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def on_a_terminal(*args: str, **env: str) -> str:
    """What the command prints when its stdout is a terminal (a pseudo-terminal here)."""
    leader, follower = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    with subprocess.Popen(
        [sys.executable, "-m", "ctxbudget", *args],
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env={**environment, "COLUMNS": "100", **env},
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65_536)
            except OSError:  # the follower closed: the process is done
                break
            if not data:
                break
            chunks.append(data)
        process.wait()
    os.close(leader)
    return b"".join(chunks).decode("utf-8")


# --- through a subprocess, as a user runs it ----------------------------------------------


def test_cli_version_prints_name_and_installed_version() -> None:
    done = run("--version")

    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"ctxbudget {version('ctxbudget')}\n",
        "",
    )


def test_cli_console_script_runs_the_same_command() -> None:
    script = Path(sys.executable).with_name("ctxbudget")

    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=True)

    assert done.stdout == f"ctxbudget {version('ctxbudget')}\n"


def test_cli_without_arguments_prints_the_demo_in_plain_text() -> None:
    done = run()

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.split("\n", 1)[0].strip("─") == " ctxbudget demo: preset conflict "
    assert "\n<retrieved_documents>\n" in done.stdout
    assert ESC not in done.stdout


def test_cli_on_a_terminal_styles_the_view() -> None:
    assert ESC in on_a_terminal("demo", "--preset", "permissions")


def test_cli_on_a_terminal_with_no_color_prints_plain_text() -> None:
    out = on_a_terminal("demo", "--preset", "permissions", NO_COLOR="1")

    assert "board-minutes-2026-04#warehouse-consolidation" in out
    assert ESC not in out


def test_cli_json_is_exactly_one_document() -> None:
    done = run("demo", "--preset", "conflict", "--json")

    data = json.loads(done.stdout)  # one document: anything after it would not parse
    assert set(data) == {
        "preset",
        "question",
        "model",
        "principal",
        "notes",
        "prompt",
        "sources",
        "report",
    }


def test_cli_with_invalid_budget_file_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    path = write(tmp_path, "budget.toml", "total = 6000\n[allocations.retrieved]\nmin = -1\n")

    done = run("--budget", path)

    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == (
        f"ctxbudget: {path}: [allocations.retrieved] min must be 0 or more, but is -1; "
        "add priority = <n> to [allocations.retrieved] "
        "(0 is never trimmed; higher numbers are trimmed first)\n"
    )


def test_cli_unknown_option_is_a_usage_error_exit_2() -> None:
    done = run("demo", "--colour")

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("ctxbudget: unrecognized arguments: --colour; see 'ctxbudget --help'\n")


def test_cli_output_to_a_closed_pipe_stops_quietly() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "ctxbudget", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None
        process.stdout.close()  # the reader is gone before the first write
        _, err = process.communicate()

    assert (process.returncode, err) == (1, b"")


def test_cli_terminal_that_cannot_encode_the_view_says_what_to_set() -> None:
    done = run("demo", PYTHONIOENCODING="ascii")

    assert done.returncode == 1
    assert done.stderr.startswith("ctxbudget: this terminal's encoding (ascii) cannot show ")
    assert done.stderr.endswith("; set PYTHONIOENCODING=utf-8, or pass --json\n")


def test_cli_json_works_in_any_encoding() -> None:
    done = run("demo", "--json", PYTHONIOENCODING="ascii")

    assert json.loads(done.stdout)["preset"] == "conflict"


def test_cli_keeps_library_warnings_off_stderr(tmp_path: Path) -> None:
    # History (priority 1) trims retrieval (priority 2): the library logs a WARNING.
    chunks = [Chunk(id=f"c{i}", content=" ".join(f"w{i}x{j}" for j in range(40))) for i in range(8)]
    turns = [Turn(role="user", content="chat " * 80) for _ in range(6)]
    path = write(tmp_path, "chunks.jsonl", "\n".join(c.model_dump_json() for c in chunks))
    history = write(tmp_path, "history.jsonl", "\n".join(t.model_dump_json() for t in turns))
    budget = write(
        tmp_path,
        "budget.toml",
        "total = 900\n[allocations.history]\npriority = 1\n[allocations.retrieved]\npriority = 2\n",
    )

    done = run("inspect", path, "-q", "Q?", "--history", history, "--budget", budget, "--json")

    assert json.loads(done.stdout)["report"]["retrieval_trimmed"] is True
    assert done.stderr == ""


def test_cli_import_loads_neither_rich_nor_the_retriever() -> None:
    heavy = ("rich", "bm25s", "numpy", "markdown_it")

    assert loaded_after("import ctxbudget.__main__", heavy) == set()


# --- through main(), in process -----------------------------------------------------------


def test_main_version_returns_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"ctxbudget {version('ctxbudget')}\n"


def test_main_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0

    out = capsys.readouterr().out
    assert all(f"\n    {name} " in out for name in ("demo", "inspect", "count", "eval"))
    assert "Exit status: 0 done, 1 a failure" in out


def test_main_options_without_a_command_go_to_the_demo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--preset", "conflict", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["preset"] == "conflict"


def test_main_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve"]) == 2
    assert capsys.readouterr().err == (
        "ctxbudget: argument COMMAND: invalid choice: 'serve' "
        "(choose from 'demo', 'inspect', 'count', 'eval'); see 'ctxbudget --help'\n"
    )


def test_main_bad_option_value_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--total", "lots"]) == 2
    assert capsys.readouterr().err == (
        "ctxbudget: argument --total: expected a whole number, got 'lots'; "
        "see 'ctxbudget demo --help'\n"
    )


def test_main_total_of_zero_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--total", "0"]) == 2
    assert "argument --total: must be more than 0, got 0;" in capsys.readouterr().err


def test_main_with_budget_file_missing_tables_names_them_in_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "budget.toml", "total = 6000\n[allocations.retrieved]\npriority = 1\n")

    assert main(["--budget", path]) == 1
    assert capsys.readouterr().err == (
        f"ctxbudget: {path}: examples, tools and history are sent but have no allocation; add "
        "an [allocations.examples] table (for example with min = 250, max = 250, priority = 1); "
        "an [allocations.tools] table (for example with max = 1200, priority = 2); "
        "an [allocations.history] table (for example with max = 1500, priority = 3)\n"
    )


def test_main_with_json_budget_file_error_uses_json_syntax(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "budget.json", '{"total": 6000, "allocations": {"tools": {}}}')

    assert main(["--budget", path]) == 1
    assert capsys.readouterr().err == (
        f'ctxbudget: {path}: add "priority": <n> to allocations.tools '
        "(0 is never trimmed; higher numbers are trimmed first)\n"
    )


def test_main_with_missing_budget_file_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nope.toml"

    assert main(["--budget", str(path)]) == 1
    assert capsys.readouterr().err == f"ctxbudget: budget file {path} does not exist\n"


def test_main_with_budget_directory_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--budget", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"ctxbudget: budget file {tmp_path} is a directory; give a file\n"
    )


def test_main_with_total_below_reserve_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--total", "400"]) == 1
    assert capsys.readouterr().err == (
        "ctxbudget: --total 400: reserve_output (500) must be less than total (400); "
        "nothing would be left for the prompt\n"
    )


def test_main_with_unknown_model_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "acme-3"]) == 1

    err = capsys.readouterr().err
    assert err.startswith("ctxbudget: no known tokenizer for model 'acme-3'. ")
    assert "CallableTokenizer(fn, name=...)" in err
    assert err.count("\n") == 1


def test_main_unreadable_file_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "a.txt", "text")

    def refuse(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)

    assert main(["count", path]) == 1
    assert capsys.readouterr().err == f"ctxbudget: cannot read file {path}: Permission denied\n"


def test_main_os_error_while_running_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device", "/tmp/out")

    monkeypatch.setattr("ctxbudget._cli.outcome.print_json", fail)

    assert main(["--json"]) == 1
    assert capsys.readouterr().err == "ctxbudget: cannot read /tmp/out: No space left on device\n"


def test_main_interrupted_returns_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupt(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr("ctxbudget._cli.outcome.print_json", interrupt)

    assert main(["--json"]) == 130
    assert capsys.readouterr().err == ""


def test_main_without_rich_points_to_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxbudget._cli

    monkeypatch.delitem(sys.modules, "ctxbudget._cli.terminal", raising=False)
    monkeypatch.delattr(ctxbudget._cli, "terminal", raising=False)
    monkeypatch.setitem(sys.modules, "rich.console", None)  # as if rich were not installed

    assert main(["demo"]) == 1
    assert capsys.readouterr().err == (
        "ctxbudget: the terminal view needs rich: pip install 'ctxbudget[cli]' (or pass --json)\n"
    )


def test_main_demo_without_the_retriever_points_to_the_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxbudget import _demo

    monkeypatch.setattr(_demo, "handbook", _missing_bm25s)

    assert main(["--json"]) == 1
    assert capsys.readouterr().err == (
        "ctxbudget: ctxbudget demo needs bm25s: pip install 'ctxbudget[cli]'\n"
    )


def _missing_bm25s(*args: object) -> object:
    raise ModuleNotFoundError("No module named 'bm25s'", name="bm25s")
