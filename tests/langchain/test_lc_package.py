"""The adapter package: exports, version, typing marker, and the install hint without langchain."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import langchain_ctxbudget
from ctxbudget import __version__ as core_version
from tests.support.imports import loaded_after

BLOCK = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] in {blocked!r}:\n"
    "            raise ImportError(f'blocked {{name}}')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_all_is_sorted() -> None:
    assert list(langchain_ctxbudget.__all__) == sorted(
        langchain_ctxbudget.__all__, key=lambda name: (not name[0].isupper(), name)
    )


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(langchain_ctxbudget).items()
        if not name.startswith("_") and not isinstance(value, type(sys))
    }
    assert set(langchain_ctxbudget.__all__) == public


def test_public_names_have_docstrings() -> None:
    for name in langchain_ctxbudget.__all__:
        assert getattr(langchain_ctxbudget, name).__doc__, name


def test_version_is_the_distributions() -> None:
    assert langchain_ctxbudget.__version__ == core_version


def test_package_ships_py_typed_marker() -> None:
    assert (Path(langchain_ctxbudget.__file__).parent / "py.typed").is_file()


def test_import_without_langchain_core_says_what_to_install() -> None:
    code = BLOCK.format(blocked={"langchain_core"}) + (
        "try:\n    import langchain_ctxbudget\nexcept ImportError as error:\n    print(error)\n"
    )
    assert "pip install 'ctxbudget[langchain]'" in run(code)


def test_import_does_not_need_langchain_itself() -> None:
    frameworks = {"langchain", "langchain_classic", "langgraph"}
    code = BLOCK.format(blocked=frameworks) + "import langchain_ctxbudget\n"
    assert loaded_after(code, frameworks) == set()


def test_old_metadata_mapping_name_warns_and_is_document_metadata_mapping() -> None:
    with pytest.warns(
        DeprecationWarning,
        match=r"langchain_ctxbudget\.MetadataMapping is deprecated.*"
        r"use langchain_ctxbudget\.DocumentMetadataMapping$",
    ):
        old = langchain_ctxbudget.MetadataMapping  # type: ignore[attr-defined]
    assert old is langchain_ctxbudget.DocumentMetadataMapping
    assert "MetadataMapping" not in langchain_ctxbudget.__all__


def test_every_public_class_is_named_by_the_package_and_pickles_by_that_path() -> None:
    classes = [
        value
        for name in langchain_ctxbudget.__all__
        if isinstance(value := getattr(langchain_ctxbudget, name), type)
    ]
    assert {cls.__name__: cls.__module__ for cls in classes} == {
        cls.__name__: "langchain_ctxbudget" for cls in classes
    }
    for cls in classes:
        assert pickle.loads(pickle.dumps(cls)) is cls
