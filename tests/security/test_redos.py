# Look-alike characters are part of the hostile shapes.
# ruff: noqa: RUF001
"""Every pass over untrusted text is linear in its length (docs/sources.md,
"Hostile content").

Each hostile shape — long runs of whitespace, openers, repeated prefixes of each
pattern, dense look-alikes — is timed twice: against ordinary text of the same size
(hostile / ordinary must stay under 20), and against itself at a quarter of the size
(four times the size must cost under 8 times as much: 4 is linear, 16 quadratic; a
quarter rather than a half leaves a factor of 2 either way for a busy machine). No
wall-clock threshold: ratios of CPU times (other processes on the machine do not
count) measured in the same test, in alternation, best of several runs, with the
garbage collector off. A quadratic pattern at these sizes takes
seconds where a linear one takes milliseconds, so the margins are wide.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from ctxbudget import Allocation, Budget, CallableTokenizer, Chunk, ContextAssembler
from ctxbudget._neutralise import neutralise, neutralise_section
from ctxbudget._normalised import is_blank, removable_bytes
from ctxbudget._scan import scan_for_instructions
from tests.support.cputime import (
    MAX_GROWTH,
    MAX_RATIO,
    ORDINARY_ASCII,
    SIZE,
    fill,
    paired_times,
)
from tests.support.tokenizers import fake_count


def padded(head: str, pad: str, tail: str = "") -> Callable[[int], str]:
    """A shape: `head`, then `pad` repeated, then `tail`, `size` characters in all."""
    return lambda size: head + fill(pad, size - len(head) - len(tail)) + tail


def repeated(unit: str) -> Callable[[int], str]:
    return lambda size: fill(unit, size)


ORDINARY_WORLD = (
    "Политика возврата: 14 дней с момента доставки [3]. 退货政策：收到货物后14天内可以退货。"
    "Réunion: la société a décidé d’évaluer. Ναι: 14 ημέρες. a < b.\n"
)

ASCII_SHAPES = {
    "spaces-after-lt": padded("<", " "),
    "spaces-after-bracket": padded("Table [", " "),
    "spaces-after-lt-slash": padded("</", " "),
    "newlines-after-lt": padded("<", "\n"),
    "lt-run": repeated("<"),
    "bracket-run": repeated("["),
    "lt-slash-run": repeated("< /"),
    "fence-prefix-run": repeated("<retrieved_"),
    "fence-separator-run": padded("<retrieved", "_"),
    "frame-prefix-run": repeated("</tool"),
    "special-token-opener-run": repeated("<|x"),
    "special-token-long": padded("<|", "a"),
    "sys-prefix-run": repeated("<< /"),
    "inst-prefix-run": repeated("[ /"),
    "header-prefix-run": repeated("\n[1"),
    "header-indent": padded("\n", " ", "["),
    "quote-marks": repeated(">"),
    "hashes-and-newlines": repeated("#\n"),
    "role-word-run": repeated("\nSystem"),
    "role-then-spaces": padded("System", " "),
    "emphasis-run": repeated("\n**"),
    "image-opener-run": repeated("!["),
    "image-url-run": repeated("![](http://a"),
    "image-long-url": padded("![x](https://", "a"),
    "ignore-run": repeated("ignore all "),
    "address-run": repeated("AI "),
    "address-then-spaces": padded("AI", " "),
    "crlf": repeated("\r\n"),
}
WORLD_SHAPES = {
    "zero-width-alternating": repeated("a\u200b"),
    "fullwidth-closers": repeated("＜／ｒｅｔｒｉｅｖｅｄ＿ｄｏｃｕｍｅｎｔｓ＞"),
    "ligatures-then-header": padded("", "\ufb01", "\n[7]"),
    "marks-then-closer": padded("e", "\u0301", "</retrieved_documents>"),
    "cyrillic-look-alikes": padded("", "аеорсух", ":"),
    "supplementary-selectors": padded("x", "\U000e0100"),
    "selector-runs": repeated("a\ufe01\ufe02"),
    "zero-width-runs": repeated("\u200b\u200c\u200d"),
    "one-closer-in-world-text": padded("</retrieved_documents>", ORDINARY_WORLD),
}

NEUTRALISING = {
    "neutralise": neutralise,
    "neutralise_section": neutralise_section,
    "scan_for_instructions": scan_for_instructions,
}
BOUNDING = {"removable_bytes": removable_bytes, "is_blank": is_blank}
BOUNDED_ASCII = ("spaces-after-lt", "lt-run", "header-indent", "crlf")


def cases(*, ratios: bool) -> Sequence[object]:
    found = [
        pytest.param(shape, ORDINARY_ASCII, function, id=f"{name}-{fname}")
        for name, shape in ASCII_SHAPES.items()
        for fname, function in NEUTRALISING.items()
    ] + [
        pytest.param(shape, ORDINARY_WORLD, function, id=f"{name}-{fname}")
        for name, shape in WORLD_SHAPES.items()
        for fname, function in NEUTRALISING.items()
    ]
    # Blank text has to be read to its end, ordinary text not: only doubling tells there.
    bounding = {"removable_bytes": removable_bytes} if ratios else BOUNDING
    found += [
        pytest.param(ASCII_SHAPES[name], ORDINARY_ASCII, function, id=f"{name}-{fname}")
        for name in BOUNDED_ASCII
        for fname, function in bounding.items()
    ] + [
        pytest.param(shape, ORDINARY_WORLD, function, id=f"{name}-{fname}")
        for name, shape in WORLD_SHAPES.items()
        for fname, function in bounding.items()
    ]
    return found


@pytest.mark.parametrize(("shape", "ordinary", "function"), cases(ratios=True))
def test_hostile_shape_costs_about_what_ordinary_text_costs(
    shape: Callable[[int], str], ordinary: str, function: Callable[[str], object]
) -> None:
    hostile, usual = paired_times(function, shape(2 * SIZE), fill(ordinary, 2 * SIZE))
    assert hostile / usual < MAX_RATIO


@pytest.mark.parametrize(("shape", "ordinary", "function"), cases(ratios=False))
def test_hostile_shape_four_times_as_long_costs_about_four_times_as_much(
    shape: Callable[[int], str], ordinary: str, function: Callable[[str], object]
) -> None:
    small, large = paired_times(function, shape(SIZE), shape(4 * SIZE))
    assert large / small < MAX_GROWTH


# --- end to end -----------------------------------------------------------------------------

FAKE = CallableTokenizer(fake_count, name="fake-words")
BUDGET = Budget(
    total=1_000_000,
    allocations=(
        Allocation("system", priority=0),
        Allocation("question", priority=0),
        Allocation("retrieved", max=900_000, priority=1),
        Allocation("memory", max=50_000, priority=2),
    ),
)
ASSEMBLER = ContextAssembler(tokenizer=FAKE, budget=BUDGET)


def assembled(content: str) -> object:
    return ASSEMBLER.assemble(
        question="What is the refund window?",
        chunks=[Chunk(id="c", content=content)],
    )


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(padded("Table [", " "), id="table-bracket-spaces"),
        pytest.param(padded("<", " "), id="lt-spaces"),
        pytest.param(repeated("!["), id="image-openers"),
    ],
)
def test_assembling_a_hostile_chunk_costs_about_what_an_ordinary_one_does(
    shape: Callable[[int], str],
) -> None:
    hostile, usual = paired_times(assembled, shape(2 * SIZE), fill(ORDINARY_ASCII, 2 * SIZE))
    assert hostile / usual < MAX_RATIO
