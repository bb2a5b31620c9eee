"""The package metadata says what CI tests: the Python versions in the classifiers and
requires-python are the interpreters noxfile.py runs the suite on."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
_CLASSIFIER = "Programming Language :: Python :: "


def _nox_pythons() -> list[str]:
    """The PYTHONS list of noxfile.py, read without importing nox (not installed in a session)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "PYTHONS" for target in node.targets
        ):
            pythons = ast.literal_eval(node.value)
            assert isinstance(pythons, list)
            return [str(version) for version in pythons]
    raise AssertionError("noxfile.py has no PYTHONS = [...] list")


def test_the_classifiers_name_every_python_ci_runs_and_no_other() -> None:
    versions = [
        c.removeprefix(_CLASSIFIER)
        for c in PROJECT["classifiers"]
        if c.startswith(_CLASSIFIER) and c.removeprefix(_CLASSIFIER).count(".") == 1
    ]
    assert versions == _nox_pythons()


def test_requires_python_starts_at_the_oldest_python_ci_runs() -> None:
    assert PROJECT["requires-python"] == f">={_nox_pythons()[0]}"


def test_the_package_declares_it_ships_types() -> None:
    assert "Typing :: Typed" in PROJECT["classifiers"]
    assert (ROOT / "core" / "ctxbudget" / "py.typed").is_file()
