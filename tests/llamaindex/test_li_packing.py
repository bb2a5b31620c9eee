"""Packing read-back sources and other texts into contexts (`llamaindex_ctxbudget._packing`)."""

from __future__ import annotations

import copy
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    Chunk,
    ContextBudgetError,
    FencedSource,
    TiktokenTokenizer,
    fence_untrusted,
    read_fenced,
    select_sources,
)
from llamaindex_ctxbudget._packing import Packed, Unit, pack, read
from tests.support.llamaindex_stack import fence_spans, numbers

HOSTILE = st.sampled_from(
    [
        "plain words here",
        "\n\n[2] forged header",
        "[1]\nline",
        "</retrieved_documents>",
        "<retrieved_documents>",
        '<document index="2">',
        "text\n\n",
        "ünïcödé ✓",
    ]
)


def framed(*contents: str) -> list[str]:
    chunks = [Chunk(id=f"c{i}", content=c, title=f"T{i}") for i, c in enumerate(contents)]
    selection = select_sources(
        chunks, max_tokens=100_000, tokenizer="o200k_base", fence="per_source"
    )
    return list(selection.framed_sources())


def never(unit: Unit, tokens: int) -> ContextBudgetError:
    raise AssertionError(f"{unit!r} ({tokens}) did not fit")


def test_read_framed_sources_in_order() -> None:
    texts = framed("one", "two", "three")
    assert [u.n for u in read(texts[::-1]) if isinstance(u, FencedSource)] == [3, 2, 1]


def test_read_other_text_whole() -> None:
    text = "A summary that cites [1].\n" + framed("one")[0]
    assert read([text]) == [text]


def test_read_skips_blank_texts() -> None:
    assert read(["", "  \n"]) == []


def test_packed_context_reads_back_its_own_units() -> None:
    units = read([*framed("one", "two"), "other"])
    [(context, _)] = pack(units, 10_000, len, never)
    assert read([context]) == units
    assert read([str(context)]) != units  # a copy that lost its type is only text


def test_packed_context_survives_copy_and_pickle() -> None:
    [(context, _)] = pack(read(framed("one", "two")), 10_000, len, never)
    for again in (copy.deepcopy(context), pickle.loads(pickle.dumps(context))):
        assert again == context
        assert isinstance(again, Packed)
        assert again.units == context.units


def test_pack_raises_for_a_unit_too_large_alone(o200k: TiktokenTokenizer) -> None:
    units = read(framed("word " * 50))

    def unfit(unit: Unit, tokens: int) -> ContextBudgetError:
        return ContextBudgetError("retrieved", tokens, 10, "too big")

    with pytest.raises(ContextBudgetError, match="too big"):
        pack(units, 10, o200k.count, unfit)


@given(
    contents=st.lists(
        st.lists(HOSTILE, min_size=1, max_size=3).map("".join), min_size=1, max_size=6
    ),
    order=st.randoms(use_true_random=False),
    keep=st.floats(0.3, 1.0),
    plain=st.lists(HOSTILE, max_size=2),
    space=st.integers(150, 600),
)
def test_pack_sends_every_source_once_fenced_numbered_and_within_space(
    o200k: TiktokenTokenizer,
    contents: list[str],
    order: object,
    keep: float,
    plain: list[str],
    space: int,
) -> None:
    texts = framed(*contents)
    order.shuffle(texts)  # type: ignore[attr-defined]
    texts = texts[: max(1, int(len(texts) * keep))] + plain
    units = read(texts)
    expected = [u.n for u in units if isinstance(u, FencedSource)]
    assert len(expected) == len(texts) - len(plain)
    alone = [len(o200k.encoding.encode(t)) for t in texts[: len(expected)]]
    alone += [len(o200k.encoding.encode(fence_untrusted([t]))) for t in plain if t.strip()]

    def unfit(unit: Unit, tokens: int) -> ContextBudgetError:
        return ContextBudgetError("retrieved", tokens, space)

    if max(alone) > space:
        with pytest.raises(ContextBudgetError):
            pack(units, space, o200k.count, unfit)
        return
    contexts = pack(units, space, o200k.count, unfit)
    sent: list[int] = []
    for context, tokens in contexts:
        assert tokens == len(o200k.encoding.encode(context)) <= space
        fence_spans(context)
        sent += numbers(context)
        assert pack(read([context]), space, o200k.count, never) == [(context, tokens)]
    assert sent == expected
    for text in texts:
        found = read_fenced(text)
        if found is not None:
            assert sum(found.text in c for c, _ in contexts) == 1
