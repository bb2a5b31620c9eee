"""Fixtures for the measurement harness: a small synthetic corpus and a recording model."""

from __future__ import annotations

import pytest

from ctxbudget import Chunk
from ctxbudget.eval import Case, synthetic_corpus
from tests.support.eval_recorder import Recorder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="session")
def corpus() -> tuple[list[Case], list[Chunk]]:
    """Eight cases over a pool of 30 field notes."""
    return synthetic_corpus(cases=8, pool=30, seed=1)
