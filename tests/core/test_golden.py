"""The benchmark workloads produce the same bytes as before the speed work (benchmarks/golden.py).

A fingerprint differs only when an output changed: regenerate the reference with
``python -m benchmarks.golden --write`` when that is intended, never to make this pass.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from benchmarks.golden import GOLDEN, fingerprints

EXPECTED: dict[str, dict[str, object]] = json.loads(GOLDEN.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def found() -> Iterator[dict[str, dict[str, object]]]:
    with pytest.MonkeyPatch.context() as patch:
        # Every join count of these assemblies is also checked against a full encode.
        patch.setenv("CTXBUDGET_VERIFY_JOINS", "1")
        yield fingerprints()


def test_golden_covers_every_fingerprint(found: dict[str, dict[str, object]]) -> None:
    assert sorted(found) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_output_unchanged_for_workload(
    found: dict[str, dict[str, object]], name: str
) -> None:
    assert found[name] == EXPECTED[name]
