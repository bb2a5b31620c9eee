"""The exact count of joined parts (_joins.py) against a full `encode_ordinary`, both encodings.

The proof is in three layers: the character classes agree with the `regex` module's
Unicode tables for every code point Python assigns; every hard pair splits real tiktoken
counts for (a stride through) every code point of its classes; and hypothesis compares
joined counts with full encodes on adversarial alphabets, where deliberately wrong rules
are caught.
"""

from __future__ import annotations

from collections.abc import Callable

import hypothesis
import pytest
import regex  # type: ignore[import-untyped]  # tiktoken depends on it; no stubs
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxbudget._joins
from ctxbudget import CallableTokenizer, TiktokenTokenizer, get_tokenizer
from ctxbudget._joins import SCAN, Counted, Ends, JoinCounter, Piece, ends, hard, join_counter
from ctxbudget._tokens import VERIFY_JOINS
from ctxbudget.types import CountCache
from tests.support.join_cases import CONTEXTS, FRAGMENTS, SEPARATORS, roles, stride

ENCODINGS = {name: get_tokenizer(name) for name in ("o200k_base", "cl100k_base")}

fragment = st.sampled_from(FRAGMENTS)
adversarial = st.lists(fragment, max_size=12).map("".join)
long_run = st.tuples(fragment, st.integers(SCAN // 2, 4 * SCAN)).map(lambda r: r[0] * r[1])
texts = st.one_of(
    adversarial,
    st.text(max_size=40),
    long_run,
    st.lists(long_run | adversarial, max_size=4).map("".join),
)
surrogate = st.integers(0xD800, 0xDFFF).map(chr)


def full(encoding: str, text: str) -> int:
    return ENCODINGS[encoding].count(text)


def joined(encoding: str, pieces: list[Piece]) -> int:
    return CountCache(ENCODINGS[encoding]).count_joined(pieces)


@pytest.fixture(autouse=True)
def verified(monkeypatch: pytest.MonkeyPatch) -> None:
    # The mode stays off here: these tests compare with a full encode themselves, and
    # one test below checks the mode itself.
    monkeypatch.delenv(VERIFY_JOINS, raising=False)


# --- the property: joined counts equal full encodes ------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
@given(a=texts, separator=st.sampled_from(SEPARATORS), b=texts)
def test_joined_count_of_two_parts_and_a_separator_equals_full_encode(
    encoding: str, a: str, separator: str, b: str
) -> None:
    assert joined(encoding, [a, separator, b]) == full(encoding, a + separator + b)


@pytest.mark.parametrize("encoding", ENCODINGS)
@given(parts=st.lists(texts, max_size=8), separator=st.sampled_from(SEPARATORS))
def test_joined_count_of_many_parts_equals_full_encode(
    encoding: str, parts: list[str], separator: str
) -> None:
    pieces: list[Piece] = []
    for part in parts:
        pieces += [separator, part] if pieces else [part]
    assert joined(encoding, pieces) == full(encoding, separator.join(parts))


@pytest.mark.parametrize("encoding", ENCODINGS)
@given(parts=st.lists(st.lists(texts | surrogate, max_size=4).map("".join), max_size=5))
def test_joined_count_with_lone_surrogates_equals_full_encode(
    encoding: str, parts: list[str]
) -> None:
    assert joined(encoding, list(parts)) == full(encoding, "".join(parts))


@pytest.mark.parametrize("encoding", ENCODINGS)
@given(text=texts)
def test_split_at_every_hard_position_keeps_the_count(encoding: str, text: str) -> None:
    whole = full(encoding, text)
    for index in range(1, len(text)):
        if hard(text[index - 1], text[index]):
            assert full(encoding, text[:index]) + full(encoding, text[index:]) == whole


@pytest.mark.parametrize("encoding", ENCODINGS)
@given(parts=st.lists(texts, min_size=1, max_size=5), error=st.integers(-3, 3))
def test_joined_count_uses_ingest_counts_as_given(
    encoding: str, parts: list[str], error: int
) -> None:
    counter = CountCache(ENCODINGS[encoding])
    at = len(parts) // 2
    middle = parts[at]
    claimed = full(encoding, middle) + error
    pieces: list[Piece] = [Counted(p, claimed) if i == at else p for i, p in enumerate(parts)]
    used = ends(middle, counter.count).measured  # else its text is counted in a window
    assert counter.count_joined(pieces) == full(encoding, "".join(parts)) + (error if used else 0)


# --- each hard pair splits real counts, code point by code point ------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_every_hard_pair_splits_the_count_for_every_class_member(encoding: str) -> None:
    core = ENCODINGS[encoding].encoding
    pairs = [(x, y) for x, y in roles(stride()) if hard(x, y)]
    whole, left, right = [], [], []
    for index, (x, y) in enumerate(pairs):
        before, after = CONTEXTS[index % len(CONTEXTS)]
        whole.append(before + x + y + after)
        left.append(before + x)
        right.append(y + after)
    counts = [
        list(map(len, core.encode_ordinary_batch(batch, num_threads=2)))
        for batch in (whole, left, right)
    ]
    wrong = [
        (whole[i], counts[0][i], counts[1][i] + counts[2][i])
        for i in range(len(pairs))
        if counts[0][i] != counts[1][i] + counts[2][i]
    ]
    assert len(pairs) > 1_000
    assert wrong == []


def test_character_classes_agree_with_the_regex_module_for_every_assigned_code_point() -> None:
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    letters, digits, marks, spaces = (
        set(regex.findall(pattern, everything)) for pattern in (r"\p{L}", r"\p{N}", r"\p{M}", r"\s")
    )
    disagree = []
    for char in everything:
        ours = ctxbudget._joins._class(char)
        if ours == ctxbudget._joins._UNK:
            continue
        if char in spaces:
            theirs = ctxbudget._joins._NL if char in "\r\n" else ctxbudget._joins._WS
        elif char in letters:
            theirs = ctxbudget._joins._L
        elif char in digits:
            theirs = ctxbudget._joins._N
        elif char in marks:
            theirs = ctxbudget._joins._M
        else:
            theirs = ctxbudget._joins._APOSTROPHE if char == "'" else ctxbudget._joins._Q
        if ours != theirs:
            disagree.append(f"U+{ord(char):04X}")
    assert disagree == []


def test_python_whitespace_beyond_white_space_is_unknown() -> None:
    # str.isspace() also calls U+001C-U+001F whitespace; tiktoken's \s does not.
    extra = [c for c in map(chr, range(0x110000)) if c.isspace() and not regex.match(r"\s", c)]
    assert extra == ["\x1c", "\x1d", "\x1e", "\x1f"]
    assert all(ctxbudget._joins._class(c) == ctxbudget._joins._UNK for c in extra)


# --- wrong rules are caught --------------------------------------------------------------------

C = ctxbudget._joins
MUTATIONS = {
    # Pairs that can share a piece, declared hard. (Some wrong pairs cannot change a joined
    # count at all, because the count only ever cuts at a part's outermost hard positions
    # and measures the rest as a whole: whitespace then digit is one.)
    "digit then digit": (C._N, C._N),
    "letter then letter": (C._L, C._L),
    "apostrophe then letter": (C._APOSTROPHE, C._L),
    "other then letter": (C._Q, C._L),
    "other then line break": (C._Q, C._NL),
    "line break then whitespace": (C._NL, C._WS),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_wrong_hard_pair_is_caught_by_the_properties(
    monkeypatch: pytest.MonkeyPatch, mutation: str
) -> None:
    x, y = MUTATIONS[mutation]
    table = list(C._HARD)
    table[x * 8 + y] = True
    monkeypatch.setattr(C, "_HARD", tuple(table))

    def differs(parts: list[str]) -> bool:
        return any(joined(e, list(parts)) != full(e, "".join(parts)) for e in ENCODINGS)

    found = hypothesis.find(
        st.lists(adversarial | st.text(max_size=8), min_size=2, max_size=4),
        differs,
        settings=settings(max_examples=5_000, database=None),
    )
    assert differs(found)


@pytest.mark.parametrize(
    ("encoding", "text", "cut"),
    [
        ("o200k_base", "a  1", 3),  # after whitespace: `\s+(?!\S)` sees the end
        ("cl100k_base", "a  1", 3),
        ("o200k_base", "123", 1),  # inside a digit run
        ("o200k_base", "it's", 2),  # before a contraction
    ],
)
def test_a_position_that_is_not_hard_can_change_the_count(
    encoding: str, text: str, cut: int
) -> None:
    assert not hard(text[cut - 1], text[cut])
    assert full(encoding, text[:cut]) + full(encoding, text[cut:]) != full(encoding, text)


# --- ends of a part ------------------------------------------------------------------------------


def counting(log: list[str]) -> Callable[[str], int]:
    def count(text: str) -> int:
        log.append(text)
        return ENCODINGS["o200k_base"].count(text)

    return count


def test_ends_of_an_empty_or_one_character_text_are_soft() -> None:
    assert ends("", counting([])).first == -1
    assert ends("a", counting([])).first == -1


def test_ends_of_a_text_without_hard_positions_are_soft() -> None:
    assert ends("\n\n", counting([])) == Ends(-1, -1, 0, 0)
    assert ends("9" * 500, counting([])).first == -1


def test_ends_of_ordinary_text_are_near_its_ends() -> None:
    log: list[str] = []
    found = ends("The refund period is 30 days.", counting(log))
    assert found == Ends(3, 28, 1, 1)
    assert log == ["The", "."]


def test_ends_of_a_text_hard_only_near_its_start_derive_the_tail() -> None:
    log: list[str] = []
    text = "ab " + "x" * (3 * SCAN)
    assert ends(text, counting(log)) == Ends(2, 2, 1, -1)
    assert log == ["ab"]


def test_ends_of_a_text_hard_only_near_its_end_derive_the_head() -> None:
    log: list[str] = []
    text = "x" * (3 * SCAN) + " ab"
    assert ends(text, counting(log)) == Ends(3 * SCAN, 3 * SCAN, -1, 1)
    assert log == [" ab"]


def test_ends_only_count_short_texts() -> None:
    log: list[str] = []
    ends(("word " * 200) + "1" * 300, counting(log))
    assert max(map(len, log)) <= SCAN + 1


# --- the counter ---------------------------------------------------------------------------------


def test_join_counter_only_for_the_patterns_with_derived_rules() -> None:
    o200k = ENCODINGS["o200k_base"].encoding
    other = tiktoken.Encoding(
        name="words",
        pat_str=r"\S+|\s+",
        mergeable_ranks=o200k._mergeable_ranks,
        special_tokens={},
    )
    assert isinstance(join_counter(o200k), JoinCounter)
    assert join_counter(other) is None


def test_count_joined_of_other_tokenizers_counts_the_joined_text() -> None:
    seen: list[str] = []

    def words(text: str) -> int:
        seen.append(text)
        return len(text.split())

    counter = CountCache(CallableTokenizer(words, name="words"))
    assert counter.count_joined(["a b", "\n\n", Counted("c d e", 99)]) == 5
    assert seen == ["a b\n\nc d e"]


def test_count_joined_of_a_tiktoken_subclass_counts_the_joined_text() -> None:
    class Padded(TiktokenTokenizer):
        def count(self, text: str) -> int:
            return super().count(text) + 1

    counter = CountCache(Padded(ENCODINGS["o200k_base"].encoding))
    assert counter.count_joined(["Hello", " world"]) == 3


def test_count_joined_of_long_parts_is_cached_per_part() -> None:
    counter = CountCache(ENCODINGS["o200k_base"])
    part = "A paragraph of policy text. " * 40
    counter.count_joined([part, "\n\n", "Question: why?"])
    calls = counter.calls
    counter.count_joined(["Other text.", "\n\n", part])
    assert counter.calls == calls  # the long part was tokenized once


def test_small_counts_are_forgotten_when_the_cache_is_full(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = JoinCounter(ENCODINGS["o200k_base"].encoding)
    for index in range(65_536):
        counter._small[str(index)] = 1
    assert counter.small("x" * 300) == len(ENCODINGS["o200k_base"].encode("x" * 300))
    assert counter.small("hello") == 1
    assert len(counter._small) == 1


def test_verify_mode_raises_when_the_joins_are_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY_JOINS, "1")
    monkeypatch.setattr(JoinCounter, "total", lambda self, parts: 1)
    with pytest.raises(
        RuntimeError, match=r"counted 1 tokens by their joins but a full o200k_base encode gives 3"
    ):
        CountCache(ENCODINGS["o200k_base"]).count_joined(["Hello", " world", "!!"])


def test_verify_mode_allows_for_a_wrong_ingest_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY_JOINS, "1")
    counter = CountCache(ENCODINGS["o200k_base"])
    text = "An ingest count."
    claimed = full("o200k_base", text) + 36
    joined = counter.count_joined(["Hi.", "\n\n", Counted(text, claimed)])
    assert joined == full("o200k_base", "Hi.\n\n" + text) + 36


def test_verify_mode_off_for_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VERIFY_JOINS, "0")
    monkeypatch.setattr(JoinCounter, "total", lambda self, parts: 1)
    assert CountCache(ENCODINGS["o200k_base"]).count_joined(["Hello", " world"]) == 1


def test_verify_mode_is_read_when_the_counter_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(JoinCounter, "total", lambda self, parts: 1)
    unverified = CountCache(ENCODINGS["o200k_base"])
    monkeypatch.setenv(VERIFY_JOINS, "1")
    verified = CountCache(ENCODINGS["o200k_base"])

    assert unverified.count_joined(["Hello", " world"]) == 1
    with pytest.raises(RuntimeError, match="by their joins"):
        verified.count_joined(["Hello", " world"])


def test_count_parts_remembers_a_section_of_plain_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = CountCache(ENCODINGS["o200k_base"])
    section = ["<memory>\n", "A remembered fact.", "\n\n", "Another one.", "\n</memory>"]
    first = counter.count_parts(section)
    monkeypatch.setattr(JoinCounter, "total", lambda self, parts: pytest.fail("recounted"))
    assert counter.count_parts(list(section)) == first == full("o200k_base", "".join(section))
    assert counter.count("".join(section)) == first  # one cache with `count`


def test_count_parts_with_a_counted_piece_counts_each_time() -> None:
    counter = CountCache(ENCODINGS["o200k_base"])
    pieces: list[Piece] = ["Header\n", Counted("Body text.", 3)]
    assert (
        counter.count_parts(pieces)
        == counter.count_parts(pieces)
        == full("o200k_base", "Header\nBody text.")
    )


def test_count_parts_of_nothing_is_zero() -> None:
    assert CountCache(ENCODINGS["o200k_base"]).count_parts(["", ""]) == 0


def test_count_parts_of_other_tokenizers_counts_the_joined_text() -> None:
    counter = CountCache(CallableTokenizer(lambda text: len(text.split()), name="words"))
    assert counter.count_parts(["a b", " c"]) == 3


def test_short_ends_are_forgotten_when_the_cache_is_full() -> None:
    counter = JoinCounter(ENCODINGS["o200k_base"].encoding)
    for index in range(65_536):
        counter._ends[str(index)] = Ends(-1, -1, 0, 0)
    assert counter.ends("ab cd") == Ends(2, 2, 1, -1)
    assert len(counter._ends) == 1
