"""The test suite's own layout: test modules import support code, never each other.

Shared builders, oracles and fakes live in `tests/support/`, one module per idea. A test
module or conftest.py that another module imports is loaded a second time under another
name (pytest imports it by its file name, the importer as ``tests.…``), with a second copy
of its module-level state, and a change to one test file breaks another.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
SUPPORT = TESTS / "support"


def _python_files() -> list[Path]:
    return sorted(TESTS.rglob("*.py"))


def _is_test_module(name: str) -> bool:
    """Whether a dotted module name is a test module or a conftest (``tests.core.test_x``)."""
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def imported_test_modules(path: Path) -> list[str]:
    """Test modules and conftests that the module at `path` imports, as written there."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            dots, module = "." * node.level, node.module or ""
            if module and _is_test_module(module):
                found.append(dots + module)
            elif node.level or module.startswith("tests"):
                package = dots + (f"{module}." if module else "")
                found += [package + a.name for a in node.names if _is_test_module(a.name)]
    return found


def test_no_module_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offending = {
        str(path.relative_to(TESTS)): names
        for path in _python_files()
        if (names := imported_test_modules(path))
    }
    assert offending == {}


def test_support_code_lives_in_tests_support() -> None:
    elsewhere = [
        str(path.relative_to(TESTS))
        for path in _python_files()
        if not _is_test_module(path.stem) and SUPPORT not in path.parents
    ]
    assert elsewhere == []


def test_the_scan_finds_each_way_of_importing_a_test_module(tmp_path: Path) -> None:
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import tests.core.test_joins\n"
        "from tests.core.test_joins import FRAGMENTS\n"
        "from tests.core import test_result\n"
        "from tests.langchain.conftest import corpus\n"
        "from . import test_lc_runnable\n"
        "from .test_lc_middleware import run_agent\n"
        "from tests.support.factories import chunk\n"
        "from ctxbudget import test_helpers\n"
    )
    assert imported_test_modules(module) == [
        "tests.core.test_joins",
        "tests.core.test_joins",
        "tests.core.test_result",
        "tests.langchain.conftest",
        ".test_lc_runnable",
        ".test_lc_middleware",
    ]
