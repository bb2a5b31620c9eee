"""The docs site builds with warnings as errors, offline, lists every page, and its API
reference shows every public name.

The build runs in a subprocess into a temporary directory, as CI would run it.
mkdocs-material fetches nothing at build time unless told to: web fonts are off and the
plugins that download (privacy, social) are not used.
"""

from __future__ import annotations

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from mkdocs.config import load_config

import ctxbudget
import ctxbudget.eval
import langchain_ctxbudget
import llamaindex_ctxbudget

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "mkdocs.yml"
API_PAGES: dict[str, ModuleType] = {
    "ctxbudget": ctxbudget,
    "eval": ctxbudget.eval,
    "langchain": langchain_ctxbudget,
    "llamaindex": llamaindex_ctxbudget,
}
"""Each API reference page, and the module whose `__all__` it must show whole."""


def _fence_doctests(text: str) -> str:
    """The griffe extension's function (docs/_ext is build code, not a package)."""
    fence = runpy.run_path(str(ROOT / "docs" / "_ext" / "doctest_fences.py"))["fence_doctests"]
    result: str = fence(text)
    return result


def test_docs_site_builds_strict(tmp_path: Path) -> None:
    # Material prints a notice about MkDocs 2.0 on every build unless this is set.
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    site = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    for page, module in API_PAGES.items():
        html = (site / "api" / page / "index.html").read_text(encoding="utf-8")
        shown = set(re.findall(rf'id="{re.escape(module.__name__)}\.(\w+)"', html))
        assert set(module.__all__) - shown == set(), page


def test_docs_site_fetches_nothing_at_build_time() -> None:
    config = load_config(str(CONFIG))
    assert config.theme["font"] is False
    downloading = {"material/privacy", "material/social", "privacy", "social"}
    assert downloading & set(config.plugins) == set()


def test_docs_nav_lists_every_page() -> None:
    config = load_config(str(CONFIG))

    def pages(nav: object) -> set[str]:
        if isinstance(nav, str):
            return {nav}
        if isinstance(nav, dict):
            return set().union(*(pages(v) for v in nav.values()))
        if isinstance(nav, list):
            return set().union(*(pages(v) for v in nav))
        return set()

    docs = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert pages(config.nav) == docs


def test_doctests_in_docstrings_are_fenced_for_the_api_pages() -> None:
    text = "What it does.\n\n>>> [n for n in (1,)]\n[1]\n\nAfter."
    assert _fence_doctests(text) == (
        "What it does.\n\n```pycon\n>>> [n for n in (1,)]\n[1]\n```\n\nAfter."
    )
