"""The retrieved half composed (core/ctxbudget/_sources/pipeline.py): `SourceOptions` and the
candidates permit, relevance and rank leave."""

from __future__ import annotations

import pytest

from ctxbudget import Chunk, SourceOptions
from ctxbudget._report import records
from ctxbudget._sources.pipeline import candidates
from tests.support.factories import chunks_in_three_documents


def test_source_options_reject_unknown_option_and_bad_loader() -> None:
    with pytest.raises(ValueError, match=r"ordr"):
        SourceOptions(ordr="relevance")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"loader must have a load\(document_id\)"):
        SourceOptions(loader=object())


def test_candidates_rank_what_is_left_and_name_it_by_position() -> None:
    given_chunks = [
        Chunk(id="low", content="Low ranked.", score=0.1),
        Chunk(id="secret", content="Board minutes.", tenant="other", score=0.9),
        Chunk(id="blank", content="\u200b", score=0.8),
        Chunk(id="high", content="High ranked.", score=0.7),
        Chunk(id="unscored", content="No score."),
    ]
    ruled_out, ranked, ids = candidates(given_chunks, None, SourceOptions())
    assert [(d.id, d.reason) for d in records(ruled_out)] == [
        ("secret", "forbidden"),
        ("blank", "empty"),
    ]
    assert [c.id for c in ranked] == ["high", "low", "unscored"]
    assert list(ids) == ["high", "low", "unscored"]


def test_candidates_with_nothing_ruled_out_name_them_from_one_read() -> None:
    given_chunks = chunks_in_three_documents(5)[::-1]
    ruled_out, ranked, ids = candidates(given_chunks, None, SourceOptions())
    assert ruled_out == []
    assert list(ids) == [c.id for c in ranked] == [f"c{i}" for i in range(5)]
