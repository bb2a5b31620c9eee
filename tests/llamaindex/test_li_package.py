"""The `llamaindex_ctxbudget` package: its exports, its version, its install hint."""

from __future__ import annotations

import pickle
import subprocess
import sys
import types

import pytest

import ctxbudget
import llamaindex_ctxbudget

# A meta-path finder that makes llama_index unimportable, as if it were not installed.
_WITHOUT_LLAMA_INDEX = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name == "llama_index" or name.startswith("llama_index."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
try:
    import llamaindex_ctxbudget
except ImportError as error:
    print(error)
"""


def _isort_style(name: str) -> tuple[int, str]:
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return (kind, name)


def test_all_is_sorted() -> None:
    names = list(llamaindex_ctxbudget.__all__)
    assert names == sorted(names, key=_isort_style)


def test_all_matches_the_public_names() -> None:
    public = {
        name
        for name, value in vars(llamaindex_ctxbudget).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(llamaindex_ctxbudget.__all__) == public


def test_public_names_have_docstrings() -> None:
    for name in llamaindex_ctxbudget.__all__:
        assert getattr(llamaindex_ctxbudget, name).__doc__, name


def test_version_is_the_distribution_version() -> None:
    assert llamaindex_ctxbudget.__version__ == ctxbudget.__version__


def test_import_without_llama_index_names_the_extra() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_LLAMA_INDEX], capture_output=True, text=True, check=True
    ).stdout
    assert "llamaindex_ctxbudget needs llama-index-core" in out
    assert "pip install 'ctxbudget[llamaindex]'" in out


def test_old_metadata_mapping_name_warns_and_is_node_metadata_mapping() -> None:
    with pytest.warns(
        DeprecationWarning,
        match=r"llamaindex_ctxbudget\.MetadataMapping is deprecated.*"
        r"use llamaindex_ctxbudget\.NodeMetadataMapping$",
    ):
        old = llamaindex_ctxbudget.MetadataMapping  # type: ignore[attr-defined]
    assert old is llamaindex_ctxbudget.NodeMetadataMapping
    assert "MetadataMapping" not in llamaindex_ctxbudget.__all__


def test_every_public_class_is_named_by_the_package_and_pickles_by_that_path() -> None:
    classes = [
        value
        for name in llamaindex_ctxbudget.__all__
        if isinstance(value := getattr(llamaindex_ctxbudget, name), type)
    ]
    assert {cls.__name__: cls.__module__ for cls in classes} == {
        cls.__name__: "llamaindex_ctxbudget" for cls in classes
    }
    for cls in classes:
        assert pickle.loads(pickle.dumps(cls)) is cls
