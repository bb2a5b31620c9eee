"""Fenced blocks as LlamaIndex passes them: cut from a Selection, split whole, registered."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Chunk, SourceFormat, SourceOptions, TiktokenTokenizer, select_sources
from llamaindex_ctxbudget._blocks import SEPARATOR, Block, _Registry, block_of, split

HOSTILE = st.sampled_from(
    [
        "plain words here",
        "\n\n[2] forged header",
        "[1]\nline",
        "</retrieved_documents>",
        '<document index="2">',
        "\n",
        "text\n\n",
        "ünïcödé ✓",
    ]
)


def texts(n: int, words: int = 20) -> list[Chunk]:
    return [
        Chunk(id=f"c{i}", content=" ".join(f"w{i}x{j}" for j in range(words)), title=f"T{i}")
        for i in range(n)
    ]


def block(n: int, words: int = 20) -> Block:
    found = block_of(select_sources(texts(n, words), max_tokens=10_000, tokenizer="o200k_base"))
    assert found is not None
    return found


@given(
    contents=st.lists(st.lists(HOSTILE, min_size=1, max_size=4).map("".join), max_size=5),
    fmt=st.sampled_from(["markdown", "xml"]),
)
def test_block_of_reassembles_the_selection_exactly(contents: list[str], fmt: SourceFormat) -> None:
    chunks = [Chunk(id=f"c{i}", content=c) for i, c in enumerate(contents)]
    selection = select_sources(
        chunks,
        max_tokens=10_000,
        tokenizer="o200k_base",
        options=SourceOptions(source_format=fmt),
    )
    found = block_of(selection)
    if not selection.sources:
        assert found is None
        return
    assert found is not None
    assert found.text == selection.text
    assert found.sources == tuple(s.text for s in selection.sources)
    assert found.open.startswith("<retrieved_documents>")
    assert found.close.endswith("</retrieved_documents>")


def test_split_whole_block_that_fits_is_not_counted() -> None:
    whole = block(3)

    def refuse(text: str) -> int:
        raise AssertionError("counted a block whose count is known")

    pieces, dropped = split(whole, whole.tokens or 0, refuse)
    assert [p.block.text for p in pieces] == [whole.text]
    assert dropped == []


def test_split_packs_whole_sources_in_order(o200k: TiktokenTokenizer) -> None:
    whole = block(6)
    space = (whole.tokens or 0) // 2
    pieces, dropped = split(whole, space, o200k.count)
    assert len(pieces) > 1
    assert dropped == []
    assert [s for p in pieces for s in p.block.sources] == list(whole.sources)
    for piece in pieces:
        assert o200k.count(piece.block.text) == piece.tokens <= space
        assert piece.block.open == whole.open
        assert piece.block.close == whole.close


def test_split_drops_a_source_too_big_alone_as_oversize(o200k: TiktokenTokenizer) -> None:
    small = block(1, words=5)
    big = Block(
        small.open,
        small.close,
        (*small.sources, "[2] Big\n" + "word " * 400),
        (*small.ids, "big"),
    )
    pieces, dropped = split(big, o200k.count(small.text) + 5, o200k.count)
    assert [p.block.ids for p in pieces] == [small.ids]
    assert [(d.id, d.reason) for d in dropped] == [("big", "oversize")]
    assert dropped[0].tokens is not None
    assert dropped[0].tokens > o200k.count(small.text)


@given(n=st.integers(1, 8), share=st.floats(0.05, 1.0))
def test_split_pieces_repack_to_themselves(o200k: TiktokenTokenizer, n: int, share: float) -> None:
    # What keeps refine from looping: a piece packed again at the same space is one piece.
    count = o200k.count
    whole = block(n)
    space = int((whole.tokens or 0) * share)
    pieces, dropped = split(whole, space, count)
    kept = [i for p in pieces for i in p.block.ids]
    assert sorted(kept + [d.id for d in dropped]) == sorted(whole.ids)
    for piece in pieces:
        again, lost = split(replace(piece.block, tokens=None), space, count)
        assert [p.block.sources for p in again] == [piece.block.sources]
        assert lost == []


def test_registry_resolves_registered_texts_in_order() -> None:
    registry = _Registry(maxsize=10)
    whole = block(3)
    parts = [registry.add(whole.sources[i], whole, [i]) for i in range(3)]
    assert registry.resolve(parts) is whole
    found = registry.resolve(parts[::-1])
    assert found is not None
    assert found.sources == whole.sources[::-1]
    assert found.tokens is None


def test_registry_single_text_keeps_its_count() -> None:
    registry = _Registry(maxsize=10)
    whole = block(2)
    assert registry.resolve([registry.add(whole.text, whole)]) == whole


def test_registry_matches_stripped_text() -> None:
    registry = _Registry(maxsize=10)
    whole = block(1)
    registry.add(whole.text + "\n", whole)
    assert registry.resolve(["  " + whole.text]) == whole


def test_registry_any_unknown_text_means_plain_text() -> None:
    registry = _Registry(maxsize=10)
    whole = block(2)
    assert registry.resolve([registry.add(whole.text, whole), "something else"]) is None


def test_registry_nothing_registered_or_given_is_none() -> None:
    assert _Registry(maxsize=10).resolve([" ", ""]) is None


def test_registry_texts_of_different_blocks_in_one_fence_join() -> None:
    registry = _Registry(maxsize=10)
    one, two = block(1), block(2)
    found = registry.resolve([registry.add(one.text, one), registry.add(two.sources[1], two, [1])])
    assert found is not None
    assert found.sources == (one.sources[0], two.sources[1])
    assert found.ids == (one.ids[0], two.ids[1])


def test_registry_texts_of_different_fences_are_plain_text() -> None:
    registry = _Registry(maxsize=10)
    one, other = block(1), block(2)
    moved = Block(
        "<retrieved_documents>\nanother notice\n\n", other.close, other.sources, other.ids
    )
    assert registry.resolve([registry.add(one.text, one), registry.add(moved.text, moved)]) is None


def test_registry_forgets_the_oldest_beyond_its_size() -> None:
    registry = _Registry(maxsize=2)
    blocks = [block(n) for n in (1, 2, 3)]
    for b in blocks:
        registry.add(b.text, b)
    assert registry.resolve([blocks[0].text]) is None
    assert registry.resolve([blocks[2].text]) == blocks[2]


def test_block_text_joins_sources_inside_the_fence() -> None:
    whole = block(2)
    assert whole.text == whole.open + SEPARATOR.join(whole.sources) + whole.close
