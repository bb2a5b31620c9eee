"""Shared fixtures: real offline tokenizers, a deterministic fake one, hypothesis settings,
and no network for any test or the subprocesses it starts."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from ctxbudget import CallableTokenizer, TiktokenTokenizer, get_tokenizer
from tests.support.network_guard import sitecustomize as network_guard
from tests.support.tokenizers import fake_count

# No test may pass by downloading (CI reaches the package registries only): the guard
# refuses connections here and, as sitecustomize on PYTHONPATH, in every subprocess.
network_guard.install()
_GUARD = str(Path(network_guard.__file__).parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_GUARD, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
)
# An empty tiktoken cache, so a vocabulary cached on this machine cannot hide a download
# that would fail on a fresh one; hubs are told to stay offline.
os.environ["TIKTOKEN_CACHE_DIR"] = _EMPTY_CACHE = tempfile.mkdtemp(prefix="ctxbudget-tiktoken-")
atexit.register(shutil.rmtree, _EMPTY_CACHE, ignore_errors=True)
os.environ["HF_HUB_OFFLINE"] = "1"

settings.register_profile(
    "default",
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("default"), max_examples=1_000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# Every count of joined parts is checked against a full encode of the joined text: the
# join rule (docs/speed.md, "Where the time goes") is proven on every prompt the suite
# builds, not only its own tests.
os.environ.setdefault("CTXBUDGET_VERIFY_JOINS", "1")


@pytest.fixture(scope="session")
def o200k() -> TiktokenTokenizer:
    """The real o200k_base tokenizer (gpt-4o), built from the offline vocabulary."""
    return get_tokenizer("o200k_base")


@pytest.fixture(scope="session")
def cl100k() -> TiktokenTokenizer:
    return get_tokenizer("cl100k_base")


@pytest.fixture
def fake_tokenizer() -> CallableTokenizer:
    return CallableTokenizer(fake_count, name="fake-words")
