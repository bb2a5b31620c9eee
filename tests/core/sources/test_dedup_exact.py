# Case folding and look-alike characters are part of the generated texts.
# ruff: noqa: RUF001
"""The indexed Deduplicator gives the pairwise walk's verdict on every call (_sources/dedup.py).

`PairwiseReference` below is the rule as it was defined before the index: walk the kept
chunks in order and return the first whose embedding cosine, or whose shingle Jaccard or
containment, reaches its threshold. It lives here only, as the specification the library
is compared with, call by call, by the identity of the chunk returned: over random and
adversarial sets (near-copies, a template shared by every chunk, sub-windows, shuffled
sentences, tiny and empty texts, equal copies, odd embeddings), thresholds off or moved,
and every call pattern the packer and escalation make. The mutation tests show that the
comparison catches a bound that is one off. Verdicts are remembered per candidate: a
reused Deduplicator decides as a fresh one.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget._sources.claim as claim_module
import ctxbudget._sources.dedup as dedup_module
from ctxbudget import Chunk, ContextAssembler, Dedup, TiktokenTokenizer
from ctxbudget._sources.dedup import Deduplicator, Shingles, shingles
from ctxbudget._textcache import ShingleCache, VerdictKey, shingle_cache
from ctxbudget.types import CountCache
from tests.support.factories import budget_for


class PairwiseReference:
    """Today's definition, pair by pair, as first written (no index, no memo)."""

    def __init__(self, settings: Dedup) -> None:
        self.settings = settings

    def duplicates(self, candidate: Chunk, kept: Sequence[Chunk]) -> Chunk | None:
        s = self.settings
        if not kept or (s.jaccard is None and s.containment is None and s.cosine is None):
            return None
        return next((other for other in kept if self.same(candidate, other)), None)

    def same(self, candidate: Chunk, other: Chunk) -> bool:
        s = self.settings
        if (
            s.cosine is not None
            and candidate.embedding is not None
            and other.embedding is not None
            and reference_cosine(candidate.embedding, other.embedding) >= s.cosine
        ):
            return True
        if s.jaccard is None and s.containment is None:
            return False
        mine = reference_shingles(candidate.content, s.shingle_size)
        if not mine:
            return False
        theirs = reference_shingles(other.content, s.shingle_size)
        return self.near(len(mine & theirs), len(mine), len(theirs))

    def near(self, shared: int, mine: int, theirs: int) -> bool:
        s = self.settings
        if s.jaccard is not None and shared / (mine + theirs - shared) >= s.jaccard:
            return True
        return s.containment is not None and shared / mine >= s.containment


@functools.cache
def reference_shingles(text: str, size: int) -> Shingles:
    """`shingles`, remembered: the reference compares every pair."""
    return shingles(text, size)


def reference_cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# --- call patterns ----------------------------------------------------------------------


Call = tuple[Chunk, list[Chunk]]


def packer_walk(chunks: Sequence[Chunk], judge: Callable[[Chunk, list[Chunk]], bool]) -> list[Call]:
    """What `Packer.pack` asks: each candidate against the chunks kept before it."""
    kept: list[Chunk] = []
    calls: list[Call] = []
    for candidate in chunks:
        calls.append((candidate, list(kept)))
        if not judge(candidate, kept):
            kept.append(candidate)
    return calls


def patterns(chunks: Sequence[Chunk], rng: random.Random, settings: Dedup) -> list[Call]:
    """A walk, a repack of a prefix, the walk again, escalation's `[*inside, *kept]`, and
    arbitrary kept lists (random subsets in random order: truncation)."""
    reference = PairwiseReference(settings)
    walk = packer_walk(chunks, lambda c, k: reference.duplicates(c, k) is not None)
    calls = list(walk)
    cut = rng.randrange(len(walk) + 1)
    calls += walk[:cut]
    calls += walk
    if chunks:
        inside = [chunks[rng.randrange(len(chunks))], *rng.sample(chunks, min(2, len(chunks)))]
        calls += [(candidate, [*inside, *kept]) for candidate, kept in walk]
    for _ in range(4):
        kept = rng.sample(list(chunks), rng.randrange(len(chunks) + 1))
        calls += [(candidate, kept) for candidate in rng.sample(list(chunks), len(chunks))]
    return calls


def mismatches(chunks: Sequence[Chunk], settings: Dedup, seed: int) -> list[str]:
    """Every call where the library and the reference return different chunks."""
    library, reference = Deduplicator(settings), PairwiseReference(settings)
    out = []
    for candidate, kept in patterns(chunks, random.Random(seed), settings):
        got, want = library.duplicates(candidate, kept), reference.duplicates(candidate, kept)
        if got is not want:
            out.append(f"{candidate.id} vs {[c.id for c in kept]}: {got} is not {want}")
    return out


# --- sets -------------------------------------------------------------------------------

TRAPS = ["ß", "SS", "ss", "İ", "ı", "I", "ǅ", "ﬁ", "fi", "Ω", "—", "...", ""]


def prose(rng: random.Random, words: int, vocabulary: int) -> list[str]:
    pool = [f"w{i}" for i in range(vocabulary)] + TRAPS
    return [rng.choice(pool) for _ in range(words)]


def edit(rng: random.Random, words: list[str], edits: int) -> list[str]:
    out = list(words)
    for _ in range(edits):
        if out:
            out[rng.randrange(len(out))] = f"e{rng.randrange(10**6)}"
    return out


def corpus(rng: random.Random, size: int) -> list[Chunk]:
    """One adversarial set: its kind picked at random, texts and embeddings varied."""
    kind = rng.choice(["prose", "copies", "template", "windows", "shuffled", "tiny", "mixed"])
    vocabulary = rng.choice([2, 5, 30, 200])
    base = prose(rng, rng.randrange(40, 400), vocabulary)
    header = prose(rng, rng.randrange(5, 200), vocabulary)
    texts: list[list[str]] = []
    for _ in range(size):
        if kind == "prose":
            texts.append(prose(rng, rng.randrange(0, 300), vocabulary))
        elif kind == "copies":
            texts.append(edit(rng, base, rng.randrange(0, 80)))
        elif kind == "template":
            texts.append(header + prose(rng, rng.randrange(10, 300), vocabulary))
        elif kind == "windows":
            start = rng.randrange(len(base))
            texts.append(edit(rng, base[start : start + rng.randrange(5, 200)], rng.randrange(4)))
        elif kind == "shuffled":
            sentences = [base[i : i + 8] for i in range(0, len(base), 8)]
            rng.shuffle(sentences)
            texts.append([w for s in sentences[: rng.randrange(1, len(sentences) + 1)] for w in s])
        elif kind == "tiny":
            texts.append(prose(rng, rng.randrange(0, 8), vocabulary))
        else:
            texts.append(rng.choice([base, header, *texts[-3:]]) if texts else base)
    dimensions = rng.choice([0, 2, 8])
    chunks: list[Chunk] = []
    for i, words in enumerate(texts):
        chunks.append(
            Chunk(
                id=f"c{i}",
                content=" ".join(words) if rng.random() < 0.9 else "!? ... —",
                embedding=embedding(rng, dimensions, chunks),
            )
        )
        if rng.random() < 0.1:  # an exact repeat: the same object or an equal copy
            again = chunks[-1] if rng.random() < 0.5 else chunks[-1].model_copy()
            chunks.append(again)
    return chunks


def embedding(
    rng: random.Random, dimensions: int, earlier: list[Chunk]
) -> tuple[float, ...] | None:
    if not dimensions or rng.random() < 0.15:
        return None
    roll = rng.random()
    if roll < 0.05:
        return (0.0,) * dimensions
    if roll < 0.1:
        return (1.0,) * (dimensions + 1)  # another length: never similar
    near = [c.embedding for c in earlier if c.embedding is not None]
    if near and roll < 0.6:
        return tuple(x + rng.gauss(0, 0.3) for x in rng.choice(near))
    return tuple(rng.gauss(0, 1) for _ in range(dimensions))


def settings_for(rng: random.Random) -> Dedup:
    def threshold(default: float) -> float | None:
        roll = rng.random()
        if roll < 0.15:
            return None
        if roll < 0.5:
            return default
        return rng.choice([1.0, round(rng.uniform(0.01, 1.0), 3)])

    return Dedup(
        jaccard=threshold(0.5),
        containment=threshold(0.9),
        cosine=threshold(0.9),
        shingle_size=rng.choice([1, 2, 3, 5, 7]),
    )


# --- the comparisons --------------------------------------------------------------------


@pytest.mark.parametrize("pairwise", [0, 3, dedup_module._PAIRWISE])
@pytest.mark.parametrize("seed", range(12))
def test_indexed_verdicts_equal_pairwise_on_random_sets(
    monkeypatch: pytest.MonkeyPatch, seed: int, pairwise: int
) -> None:
    # pairwise: how many kept chunks are compared one by one before the index is built.
    monkeypatch.setattr(dedup_module, "_PAIRWISE", pairwise)
    rng = random.Random(seed)
    chunks = corpus(rng, rng.randrange(1, 60))
    assert mismatches(chunks, settings_for(rng), seed) == []


def test_indexed_verdicts_equal_pairwise_past_the_index_threshold() -> None:
    # Enough kept chunks for the index at its real threshold, every set kind.
    for seed in range(100, 112):
        rng = random.Random(seed)
        chunks = corpus(rng, 60)
        assert mismatches(chunks, settings_for(rng), seed) == [], seed


def test_indexed_verdicts_equal_pairwise_when_a_template_fills_most_of_each_chunk() -> None:
    # The worst case for an inverted index: every kept chunk holds the same 200 words.
    rng = random.Random(7)
    template = prose(rng, 200, 10_000)
    chunks = [
        Chunk(id=f"t{i}", content=" ".join(template + prose(rng, rng.randrange(20, 400), 10_000)))
        for i in range(50)
    ]
    assert mismatches(chunks, Dedup(), 7) == []


words_ = st.lists(
    st.sampled_from(["a", "b", "c", "A", "b.", "c,", "ß", "SS", "ı", "I"]), max_size=14
)
vectors = st.none() | st.tuples(*[st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0])] * 2)
thresholds = st.none() | st.floats(min_value=0.05, max_value=1.0)


@given(
    texts=st.lists(st.tuples(words_.map(" ".join), vectors), min_size=1, max_size=12),
    jaccard=thresholds,
    containment=thresholds,
    cosine=thresholds,
    size=st.integers(1, 6),
    seed=st.integers(0, 2**16),
)
def test_indexed_verdicts_equal_pairwise_on_generated_sets(
    texts: list[tuple[str, tuple[float, float] | None]],
    jaccard: float | None,
    containment: float | None,
    cosine: float | None,
    size: int,
    seed: int,
) -> None:
    chunks = [Chunk(id=f"c{i}", content=t, embedding=e) for i, (t, e) in enumerate(texts)]
    settings = Dedup(jaccard=jaccard, containment=containment, cosine=cosine, shingle_size=size)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dedup_module, "_PAIRWISE", 0)  # the index from the first kept chunk
        assert mismatches(chunks, settings, seed) == []


# --- mutations: the comparison has teeth ------------------------------------------------


def caught(monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the comparison finds a mismatch in the sets of the random-set test."""
    monkeypatch.setattr(dedup_module, "_PAIRWISE", 0)
    for seed in range(40):
        rng = random.Random(seed)
        chunks = corpus(rng, 30)
        if mismatches(chunks, settings_for(rng), seed):
            return True
    return False


def test_mutation_probing_one_shingle_too_few_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dedup_module._Texts._least_overlap
    monkeypatch.setattr(
        dedup_module._Texts, "_least_overlap", lambda self, size: real(self, size) + 1
    )
    assert caught(monkeypatch)


def test_mutation_a_strict_verdict_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    def strict(s: Dedup, shared: int, mine: int, theirs: int) -> bool:
        if s.jaccard is not None and shared / (mine + theirs - shared) > s.jaccard:
            return True
        return s.containment is not None and shared / mine > s.containment

    monkeypatch.setattr(dedup_module, "_near", strict)
    assert caught(monkeypatch)


def test_mutation_a_hit_bound_one_too_strict_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dedup_module._least

    def stricter(holds: Callable[[int], bool], top: int) -> int:
        return real(holds, top) + 1

    monkeypatch.setattr(dedup_module, "_least", stricter)
    assert caught(monkeypatch)


# --- the verdict cache: requests over the same texts ------------------------------------


def mismatches_across_requests(
    chunks: Sequence[Chunk], cache: ShingleCache, seed: int
) -> list[str]:
    """Every call where the library and the reference differ over four requests on one
    cache, each over new `Chunk` objects of the same texts and its own thresholds."""
    out = []
    rng = random.Random(seed)
    for turn in range(4):
        copies = [chunk.model_copy() for chunk in chunks]
        settings = settings_for(rng)
        library, reference = Deduplicator(settings, cache), PairwiseReference(settings)
        for candidate, kept in patterns(copies, random.Random(seed + turn), settings):
            got, want = library.duplicates(candidate, kept), reference.duplicates(candidate, kept)
            if got is not want:
                out.append(f"turn {turn}, {candidate.id} vs {[c.id for c in kept]}")
    return out


@pytest.mark.parametrize("maxsize", [2, 40, 16_384])
@pytest.mark.parametrize("seed", range(8))
def test_verdict_cache_verdicts_equal_pairwise_across_requests(maxsize: int, seed: int) -> None:
    # maxsize 2 and 40 evict texts and verdicts mid-request.
    rng = random.Random(seed)
    chunks = corpus(rng, rng.randrange(1, 30))
    assert mismatches_across_requests(chunks, ShingleCache(maxsize=maxsize), seed) == []


def test_verdict_cache_is_bounded_within_one_request() -> None:
    cache = ShingleCache(maxsize=10)
    chunks = [Chunk(id=f"c{i}", content=f"text {i} of its own words here") for i in range(30)]
    dedup = Deduplicator(Dedup(), cache)
    for candidate, kept in packer_walk(chunks, lambda c, k: dedup.duplicates(c, k) is not None):
        dedup.duplicates(candidate, kept)
    assert cache.verdict_calls > 10
    assert cache.verdicts == 10


def verdict_cache_caught() -> bool:
    """Whether the comparison across requests finds a mismatch."""
    return any(
        mismatches_across_requests(corpus(random.Random(seed), 25), ShingleCache(), seed)
        for seed in range(40)
    )


def test_mutation_a_verdict_key_without_thresholds_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    verdict, remember = ShingleCache.verdict, ShingleCache.remember
    monkeypatch.setattr(ShingleCache, "verdict", lambda self, key: verdict(self, (*key[:2], 0, 0)))
    monkeypatch.setattr(
        ShingleCache, "remember", lambda self, key, near: remember(self, (*key[:2], 0, 0), near)
    )
    assert verdict_cache_caught()


def test_mutation_a_verdict_key_in_either_order_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Containment is the candidate's side only: the pair's verdict is not symmetric.
    def unordered(key: VerdictKey) -> VerdictKey:
        return (min(key[:2]), max(key[:2]), *key[2:])

    verdict, remember = ShingleCache.verdict, ShingleCache.remember
    monkeypatch.setattr(ShingleCache, "verdict", lambda self, key: verdict(self, unordered(key)))
    monkeypatch.setattr(
        ShingleCache, "remember", lambda self, key, near: remember(self, unordered(key), near)
    )
    assert verdict_cache_caught()


# --- embeddings: the numpy path -----------------------------------------------------------


def at_threshold(rng: random.Random, threshold: float, dimensions: int) -> tuple[Chunk, Chunk]:
    """Two vectors whose cosine is the threshold to within rounding."""
    a = [rng.gauss(0, 1) for _ in range(dimensions)]
    noise = [rng.gauss(0, 1) for _ in range(dimensions)]
    dot = sum(x * y for x, y in zip(a, noise, strict=True)) / sum(x * x for x in a)
    noise = [y - dot * x for x, y in zip(a, noise, strict=True)]  # orthogonal to a
    scale = math.sqrt(sum(x * x for x in a) / sum(y * y for y in noise))
    angle = math.acos(threshold)
    b = [math.cos(angle) * x + math.sin(angle) * scale * y for x, y in zip(a, noise, strict=True)]
    return Chunk(id="a", content="x", embedding=tuple(a)), Chunk(
        id="b", content="y", embedding=tuple(b)
    )


@pytest.mark.parametrize("numpy", [True, False])
def test_cosine_verdicts_at_the_threshold_equal_pairwise_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch, numpy: bool
) -> None:
    # Pairs within rounding of 0.9: the numpy screen recomputes them as `cosine` does.
    if not numpy:
        monkeypatch.setattr(dedup_module, "_numpy", lambda: None)
    settings = Dedup(jaccard=None, containment=None)
    rng = random.Random(3)
    flips = 0
    for _ in range(200):
        a, b = at_threshold(rng, 0.9, 64)
        want = PairwiseReference(settings).duplicates(b, [a])
        assert Deduplicator(settings).duplicates(b, [a]) is want
        flips += want is None
    assert 0 < flips < 200  # the pairs do straddle the threshold


def cosine_verdicts_differing_at_the_threshold() -> int:
    """Of 200 embedding pairs at the 0.9 cosine threshold, how many get another verdict from
    the walk than from the pairwise reference (0 unless a margin is wrong)."""
    settings = Dedup(jaccard=None, containment=None)
    rng = random.Random(3)
    differ = 0
    for _ in range(200):
        a, b = at_threshold(rng, 0.9, 64)
        differ += Deduplicator(settings).duplicates(b, [a]) is not PairwiseReference(
            settings
        ).duplicates(b, [a])
    return differ


def test_cosine_numpy_screen_without_its_margin_flips_verdicts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without the recomputation margin numpy's own sums decide: some verdicts at the
    # threshold differ, which is what the margin is for.
    pytest.importorskip("numpy")
    monkeypatch.setattr(dedup_module, "_margin", lambda dimensions: -1e-15)
    assert cosine_verdicts_differing_at_the_threshold() > 0


def test_cosine_numpy_and_pure_python_walks_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    base = [rng.gauss(0, 1) for _ in range(32)]
    chunks = [
        Chunk(
            id=f"v{i}",
            content=f"text {i}",
            embedding=tuple(x + rng.gauss(0, 0.45) for x in base) if i % 7 else None,
        )
        for i in range(70)
    ]
    settings = Dedup(cosine=0.9)
    assert mismatches(chunks, settings, 1) == []
    monkeypatch.setattr(dedup_module, "_numpy", lambda: None)
    assert mismatches(chunks, settings, 1) == []


# --- memory and caches ----------------------------------------------------------------------


def test_compact_postings_verdicts_equal_pairwise_through_truncation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Windows of one kept chunk only are held as a bare position, shared ones as lists;
    # the arbitrary kept lists of `patterns` truncate both kinds.
    monkeypatch.setattr(dedup_module, "_PAIRWISE", 0)
    rng = random.Random(21)
    shared = prose(rng, 60, 50)
    chunks = [
        Chunk(id=f"p{i}", content=" ".join(shared[: rng.randrange(60)] + prose(rng, 80, 5_000)))
        for i in range(40)
    ]
    dedup = Deduplicator(Dedup())
    dedup.duplicates(chunks[-1], chunks[:-1])
    kinds = {type(postings) for postings in (dedup._texts._index or {}).values()}
    assert kinds == {int, list}
    assert mismatches(chunks, Dedup(), 21) == []


def test_shared_postings_verdicts_equal_pairwise_when_every_window_is_in_a_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Chunks of three sentences in any order, as the benchmark pool's prose: after a few,
    # every window a chunk holds is held by others, so inserts and probes take their
    # one-kind paths (all lists); the arbitrary kept lists of `patterns` truncate them.
    monkeypatch.setattr(dedup_module, "_PAIRWISE", 0)
    rng = random.Random(22)
    sentences = [prose(rng, 9, 40) for _ in range(3)]
    chunks = [
        Chunk(id=f"s{i}", content=" ".join(w for s in rng.sample(sentences, 3) for w in s))
        for i in range(40)
    ]
    dedup = Deduplicator(Dedup(jaccard=0.9, containment=None))
    dedup.duplicates(chunks[-1], chunks[:-1])
    kinds = {type(postings) for postings in (dedup._texts._index or {}).values()}
    assert kinds == {list}
    for settings in (Dedup(), Dedup(jaccard=0.9, containment=None)):
        assert mismatches(chunks, settings, 22) == []


def pool_prose(rng: random.Random, count: int) -> list[Chunk]:
    """Chunks of six of twelve sentences: most windows are held by many chunks, as in the
    benchmark pool's prose."""
    sentences = [prose(rng, 12, 400) for _ in range(12)]
    return [
        Chunk(id=f"s{i}", content=" ".join(w for s in rng.sample(sentences, 6) for w in s))
        for i in range(count)
    ]


def test_kept_sets_share_the_int_objects_of_windows_others_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Once indexed, a window held by many kept chunks is one int object in all of them but
    # the first (32 bytes each saved), and the shingle cache and the per-request table hold
    # the shared set, equal to the text's shingles, in place of the one first made.
    monkeypatch.setattr(dedup_module, "_PAIRWISE", 4)
    chunks = pool_prose(random.Random(23), 60)
    cache = ShingleCache()
    dedup = Deduplicator(Dedup(jaccard=0.99, containment=None), cache)
    kept: list[Chunk] = []
    for chunk in chunks:
        if dedup.duplicates(chunk, kept) is None:
            kept.append(chunk)
    dedup.duplicates(Chunk(id="last", content="nothing shared"), kept)
    held = dedup._texts._sets
    assert len(held) == len(kept) > 40
    objects: dict[int, set[int]] = {}
    for each in held[dedup_module._PAIRWISE :]:
        for window in each:
            objects.setdefault(window, set()).add(id(window))
    assert max(map(len, objects.values())) <= 2
    assert sum(map(len, objects.values())) < sum(map(len, held)) / 4
    for chunk, each in zip(kept, held, strict=True):
        assert each == shingles(chunk.content)
        assert dedup._shingles[chunk.content][0] is each
        assert cache.get(chunk.content, 5, shingles) is each
    assert mismatches(chunks, Dedup(jaccard=0.99, containment=None), 23) == []
    assert mismatches(chunks, Dedup(), 23) == []


def test_shingle_cache_shares_a_set_only_for_the_entry_it_was_made_from() -> None:
    cache = ShingleCache()
    text = "one two three four five six seven"
    first, serial = cache.lookup(text, 5, shingles)
    equal = frozenset(first)
    cache.share(text, 5, serial + 1, equal)  # a later entry's serial: not this entry
    assert cache.get(text, 5, shingles) is first
    cache.share(text, 5, serial, equal)
    assert cache.get(text, 5, shingles) is equal
    assert cache.lookup(text, 5, shingles) == (equal, serial)


def test_memo_holds_one_entry_per_candidate_not_per_pair() -> None:
    chunks = [Chunk(id=f"c{i}", content=f"distinct text number {i} " * 3) for i in range(50)]
    dedup = Deduplicator(Dedup())
    for candidate, kept in packer_walk(chunks, lambda c, k: dedup.duplicates(c, k) is not None):
        dedup.duplicates(candidate, kept)
    assert len(dedup._memo) == len(chunks) - 1


def test_repack_of_a_prefix_compares_nothing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    chunks = [Chunk(id=f"c{i}", content=f"distinct text number {i} " * 3) for i in range(10)]
    dedup = Deduplicator(Dedup())
    walk = packer_walk(chunks, lambda c, k: dedup.duplicates(c, k) is not None)
    compared: list[str] = []
    real = Deduplicator._first

    def counted(self: Deduplicator, candidate: Chunk, start: int, stop: int) -> int:
        compared.append(candidate.id)
        return real(self, candidate, start, stop)

    monkeypatch.setattr(Deduplicator, "_first", counted)
    for candidate, kept in walk[:6]:
        dedup.duplicates(candidate, kept)
    assert compared == []


def test_embedding_duplicate_is_found_without_shingles() -> None:
    a = Chunk(id="a", content="one text", embedding=(1.0, 0.0))
    b = Chunk(id="b", content="another text", embedding=(1.0, 0.0))
    dedup = Deduplicator(Dedup(jaccard=None, containment=None))
    assert dedup.duplicates(b, [a]) is a
    assert dedup._shingles == {}


def test_shingle_cache_serves_a_text_in_new_chunks() -> None:
    cache = ShingleCache()
    text = "the same chunk text in the next turn of a chat"
    first = Deduplicator(Dedup(), cache)
    first.duplicates(
        Chunk(id="b", content="other words here entirely"), [Chunk(id="a", content=text)]
    )
    calls = cache.calls
    again = Deduplicator(Dedup(), cache)
    again.duplicates(
        Chunk(id="b2", content="other words here entirely"), [Chunk(id="a2", content=text)]
    )
    assert cache.calls == calls == 2


def test_shingle_cache_is_bounded_by_weight() -> None:
    cache = ShingleCache(max_weight=100)
    for i in range(50):
        cache.get(" ".join(f"w{i}x{j}" for j in range(20)), 5, shingles)
    assert cache.weight <= 100
    assert 0 < len(cache) < 50


def test_shingle_cache_keeps_no_entry_heavier_than_its_bound() -> None:
    cache = ShingleCache(max_weight=10)
    got: Shingles = cache.get(" ".join(f"w{j}" for j in range(40)), 5, shingles)
    assert len(got) == 36
    assert len(cache) == 0


def test_shingle_cache_negative_bound_rejected() -> None:
    with pytest.raises(ValueError, match="max_weight must be >= 0, but got -1"):
        ShingleCache(max_weight=-1)


def test_shingle_cache_is_bounded_by_entries() -> None:
    cache = ShingleCache(maxsize=3)
    for i in range(10):
        cache.get(f"text {i}", 5, shingles)
    assert len(cache) == 3
    assert cache.calls == 10


def test_shingle_cache_negative_maxsize_rejected() -> None:
    with pytest.raises(ValueError, match="maxsize must be >= 0, but got -1"):
        ShingleCache(maxsize=-1)


def test_shingle_cache_serial_is_new_after_eviction() -> None:
    # A verdict keyed by an evicted text's serial must never stand for its next entry.
    cache = ShingleCache(maxsize=1)
    _, first = cache.lookup("one text", 5, shingles)
    cache.lookup("another text", 5, shingles)
    _, again = cache.lookup("one text", 5, shingles)
    assert 0 < first < again


def test_shingle_cache_of_size_zero_holds_nothing() -> None:
    cache = ShingleCache(maxsize=0)
    got, serial = cache.lookup("one text here", 5, shingles)
    cache.remember((1, 2, 0.5, 0.9), True)
    assert got == shingles("one text here")
    assert (serial, len(cache), cache.verdicts) == (0, 0, 0)


def test_shingle_cache_is_one_per_counter(o200k: TiktokenTokenizer) -> None:
    first, second = CountCache(o200k), CountCache(o200k)
    assert shingle_cache(first) is shingle_cache(first)
    assert shingle_cache(first) is not shingle_cache(second)


def test_assembler_shingle_cache_is_sized_by_cache_size(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(tokenizer=o200k, cache_size=3)
    chunks = [
        Chunk(id=f"c{i}", content=" ".join(f"t{i}w{j}" for j in range(40)), score=1 - i / 10)
        for i in range(6)
    ]
    assembler.assemble(question="Q?", chunks=chunks)
    cache = assembler.shingle_cache
    assert cache is shingle_cache(assembler.counter)
    assert (cache.maxsize, len(cache), cache.calls) == (3, 3, 6)
    assert cache.verdicts <= 3


def test_assembler_shingles_a_follow_up_over_the_same_texts_once(
    o200k: TiktokenTokenizer,
) -> None:
    assembler = ContextAssembler(tokenizer=o200k)
    texts = [" ".join(f"t{i}w{j}" for j in range(40)) for i in range(6)]
    for turn in range(3):  # new Chunk objects each turn, as a chat's next request sends
        chunks = [Chunk(id=f"c{i}", content=t, score=1 - i / 10) for i, t in enumerate(texts)]
        assembler.assemble(question=f"Q{turn}?", chunks=chunks)
    assert assembler.shingle_cache.calls == len(texts)


def test_assembler_follow_up_intersects_no_pair_again(o200k: TiktokenTokenizer) -> None:
    assembler = ContextAssembler(tokenizer=o200k)
    texts = [" ".join(f"t{i % 3}w{j}" for j in range(40 + i)) for i in range(6)]
    looked_up = []
    for turn in range(3):
        chunks = [Chunk(id=f"c{i}", content=t, score=1 - i / 10) for i, t in enumerate(texts)]
        assembler.assemble(question=f"Q{turn}?", chunks=chunks)
        looked_up.append(assembler.shingle_cache.verdict_calls)
    assert looked_up[0] > 0
    assert looked_up[2] == looked_up[1] == looked_up[0]


def test_cosine_numpy_screen_is_within_its_margin_at_1536_dimensions() -> None:
    # The stated tolerance: the float32 screen's cosines of 1,536-dim vectors differ from
    # `cosine`'s by far less than the margin, so a pair outside it cannot change sides.
    numpy = pytest.importorskip("numpy")
    rng = random.Random(5)
    a = tuple(rng.gauss(0, 1) for _ in range(1_536))
    kept = [tuple(x + rng.gauss(0, 0.5) for x in a) for _ in range(50)]
    rows = numpy.asarray(kept, dtype=numpy.float32)
    dots = numpy.einsum("ij,j->i", rows, numpy.asarray(a, dtype=numpy.float32))
    norm = math.sqrt(sum(x * x for x in a))
    worst = max(
        abs(float(dot) / (norm * math.sqrt(sum(y * y for y in b))) - reference_cosine(a, b))
        for dot, b in zip(dots.tolist(), kept, strict=True)
    )
    assert worst < dedup_module._margin(1_536) / 10


@pytest.mark.parametrize("scale", [1.0, 2.0**-30, 2.0**30])
def test_cosine_float32_screen_verdicts_equal_pairwise_near_the_threshold(scale: float) -> None:
    # Pairs up to twice the margin either side of the threshold, at 1,536 dimensions; the
    # scaled ones fall outside the screen's safe norms and are compared in pure Python.
    pytest.importorskip("numpy")
    settings = Dedup(jaccard=None, containment=None)
    margin = dedup_module._margin(1_536)
    rng = random.Random(13)
    sides = set()
    for _ in range(60):
        a, b = at_threshold(rng, 0.9 + rng.uniform(-2, 2) * margin, 1_536)
        a = a.model_copy(update={"embedding": tuple(x * scale for x in a.embedding or ())})
        want = PairwiseReference(settings).duplicates(b, [a])
        assert Deduplicator(settings).duplicates(b, [a]) is want
        sides.add(want is None)
    assert sides == {True, False}


def test_mutation_a_float32_margin_too_small_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # A hundredth of the margin lets float32 rounding decide pairs at the threshold.
    pytest.importorskip("numpy")
    real = dedup_module._margin
    monkeypatch.setattr(dedup_module, "_margin", lambda dimensions: real(dimensions) / 100)
    assert cosine_verdicts_differing_at_the_threshold() > 0


def test_assemble_with_index_equals_assemble_with_pairwise_reference(
    o200k: TiktokenTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the index threshold, every third chunk a near-copy of an earlier one: the same
    # prompt and the same drops as with today's pairwise rule in its place.
    rng = random.Random(9)
    bases = [prose(rng, 120, 400) for _ in range(60)]
    texts = [
        edit(rng, bases[rng.randrange(i // 3 + 1)], 3) if i % 3 == 2 else bases[i - i // 3]
        for i in range(90)
    ]
    chunks = [
        Chunk(id=f"c{i}", content=" ".join(t), score=1 - i / 100) for i, t in enumerate(texts)
    ]
    budget = budget_for("retrieved", None, total=100_000)
    got = ContextAssembler(tokenizer=o200k, budget=budget).assemble(question="Q?", chunks=chunks)
    monkeypatch.setattr(
        claim_module, "Deduplicator", lambda settings, cache: PairwiseReference(settings)
    )
    want = ContextAssembler(tokenizer=o200k, budget=budget).assemble(question="Q?", chunks=chunks)
    assert got.text == want.text
    assert got.report.dropped == want.report.dropped
    assert len(got.sources) > dedup_module._PAIRWISE
    assert any(d.reason == "duplicate" for d in got.report.dropped)


words = st.lists(st.sampled_from(["refund", "order", "days", "policy", "the", "item"]), max_size=12)


@given(texts=st.lists(words.map(" ".join), min_size=1, max_size=8))
def test_remembered_verdicts_equal_fresh_ones(texts: list[str]) -> None:
    chunks = [Chunk(id=f"c{i}", content=t or "x") for i, t in enumerate(texts)]
    settings = Dedup(jaccard=0.5, containment=0.9)
    reused = Deduplicator(settings)
    for _ in range(2):  # the second pass is answered from memory
        for index, candidate in enumerate(chunks):
            kept = chunks[:index]
            assert reused.duplicates(candidate, kept) is Deduplicator(settings).duplicates(
                candidate, kept
            )
