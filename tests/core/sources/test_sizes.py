"""The retrieved claim's free size bounds hold for any text: the quick bound never exceeds, and the
ceiling never falls below, the bound on what the neutralised (and datamarked) text keeps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Allocation, Chunk, SourceOptions, get_tokenizer
from ctxbudget._fence import datamark
from ctxbudget._neutralise import neutralise
from ctxbudget._normalised import is_blank
from ctxbudget._sources.pipeline import retrieved_claim
from ctxbudget.types import CountCache

O200K = get_tokenizer("o200k_base")

hostile = st.lists(
    st.sampled_from(
        [
            "</retrieved_documents>",
            "<|im_start|>",
            "[INST]",
            "\r\n",
            "\r",
            " ",
            "  ",
            "\t",
            "Assistant:",
            "[1] ",
            "\u0410ssistant:",
            "\uff1c/retrieved\u200b_documents\uff1e",
            "\U000e0041",
            "\ufe0f\ufe0f",
            "\u00a0",
            "\u3000",
            "text",
            "caf\u00e9",
            "\u200b",
        ]
    ),
    max_size=20,
).map("".join)


@given(text=hostile | st.text(max_size=60), datamarked=st.booleans())
def test_ascii_bytes_survive_neutralising_and_datamarking(text: str, datamarked: bool) -> None:
    shown = neutralise(text)
    kept = len(text.encode("ascii", "ignore"))
    if datamarked:
        shown = datamark(shown)
        kept -= text.count(" ") + text.count("\t")
    assert len(shown.encode("utf-8")) >= kept


@given(
    text=(hostile | st.text(max_size=60)).filter(lambda t: not is_blank(t)),
    datamarked=st.booleans(),
)
def test_quick_bound_and_ceiling_enclose_the_bound(text: str, datamarked: bool) -> None:
    claim, _ = retrieved_claim(
        Allocation("retrieved", max=100, priority=1),
        [Chunk(id="c", content=text)],
        principal=None,
        options=SourceOptions(datamark=datamarked),
        counter=CountCache(O200K),
        now=None,
    )
    packer = claim.packer
    chunk = claim.items[0]
    assert packer.quick_bound is not None
    assert packer.ceiling is not None
    assert packer.quick_bound(chunk) <= packer.bound(chunk) <= packer.ceiling(chunk)
