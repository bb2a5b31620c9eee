"""The benchmark workloads: deterministic prompts of the shape the speed targets are stated for.

One request: a 607-token system prompt, 20 conversation turns, a question, and 200
retrieved chunks of about 415 o200k tokens from 40 documents, under a 6,000-token
budget with retrieval capped at 3,000. Variants change one thing each: counts given at
ingest or not, 10 to 10,000 candidates, a 1 MB chunk among them, a 200-turn history.
`WINDOW_WORKLOADS` fill a gpt-4.1 window (retrieval 553,950 tokens) with 500 to 5,000
chunks of about 370 tokens, all kept: plain, with 1,536-dim embeddings, or opening with
one shared boilerplate template, and 1,000 or 2,000 of Zipfian prose (`zipf_prose`,
whose 5-word windows are mostly distinct, where the pool's repeat); the follow-up
workload resends the same chunk texts in new `Chunk` objects, as a chat's next turn does.

Texts come from a fixed pool of sentences combined by a seeded generator, so every
`seed` gives new chunk texts (no token count can be served from an earlier request's
cache) and the same seed always gives the same bytes. The golden test
(tests/core/test_golden.py) assembles seed 0 of every workload.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ctxbudget import Allocation, Assembled, Budget, Chunk, ContextAssembler, Turn, get_tokenizer

ENCODING = "o200k_base"
NOW = datetime(2026, 5, 1, tzinfo=UTC)
"""The reference time for freshness notes, fixed so outputs do not depend on the day."""

_SUBJECTS = [
    "The customer", "A returning buyer", "The warehouse team", "Our support desk",
    "The carrier", "Each regional store", "The finance office", "A business account",
    "The returns portal", "Müller GmbH", "The café chain in Zürich", "The Tokyo office (東京)",
    "Every subscriber", "The account owner", "A reseller", "The quality team",
]  # fmt: skip
_VERBS = [
    "must confirm", "can request", "should review", "may cancel", "will receive",
    "needs to keep", "is entitled to", "has to report", "can extend", "will not refund",
    "should photograph", "must return", "may exchange", "is charged for",
]  # fmt: skip
_OBJECTS = [
    "the original receipt", "a prepaid shipping label", "the damaged parcel",
    "any unused accessories", "the invoice number", "a replacement item",
    "the tracking reference", "the warranty card", "store credit", "the packing slip",
    "a written statement", "the serial number", "the order confirmation e-mail",
]  # fmt: skip
_TAILS = [
    "within 30 days of delivery", "before the end of the billing period",
    "unless the item was marked as final sale", "as described in section 4.2",
    "for orders over €49.90", "when the defect appears after 6 months",
    "if the seal is broken", "on business days between 09:00 and 17:00",
    "according to the 2024 tariff schedule", "except for custom-made goods",
    "after the inspection is complete", "at no extra cost", "in line with clause 7(b)",
    "provided the product code starts with RX-", "even when the box was opened",
]  # fmt: skip
_EXTRAS = [
    "Refunds are issued to the original payment method.",
    "Partial refunds apply to items showing signs of wear.",
    "See the FAQ for exceptions that apply to electronics — they differ by region.",
    "Note: gift cards cannot be returned or exchanged.",
    "- Keep all packaging until the claim is closed.",
    "- Contact support@example.com with the order ID (e.g. #A-10293).",
    "Prices include VAT at 19 % unless stated otherwise.",
    "Claims filed late are reviewed case by case; approval isn't guaranteed.",
    "Délai de rétractation: 14 jours à compter de la réception.",
    "The policy was last reviewed by legal in Q3 and remains in force.",
    "Escalations go to the tier-2 queue within 48 hours 🙂.",
]  # fmt: skip
_TOPICS = [
    "Returns policy", "Shipping FAQ", "Warranty terms", "Billing and invoices",
    "Damaged goods", "Store credit", "Business accounts", "Subscriptions",
]  # fmt: skip


@functools.cache
def _sentences() -> tuple[str, ...]:
    """2,000 sentences of policy prose: the pool every chunk, turn and prompt is drawn from."""
    rng = random.Random(20260501)
    pool = []
    for _ in range(2_000):
        sentence = (
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_TAILS)}."
        )
        if rng.random() < 0.3:
            sentence += " " + rng.choice(_EXTRAS)
        pool.append(sentence)
    return tuple(pool)


@functools.cache
def _sizes() -> tuple[int, ...]:
    """The o200k count of each pool sentence."""
    tokenizer = get_tokenizer(ENCODING)
    return tuple(tokenizer.count(" " + s) for s in _sentences())


def prose(rng: random.Random, tokens: int) -> str:
    """Paragraphs of four pool sentences, about `tokens` o200k tokens long."""
    pool, sizes = _sentences(), _sizes()
    paragraphs: list[list[str]] = [[]]
    total = 0
    while total + 10 < tokens:
        if len(paragraphs[-1]) == 4:
            paragraphs.append([])
        pick = rng.randrange(len(pool))
        paragraphs[-1].append(pool[pick])
        total += sizes[pick]
    return "\n\n".join(" ".join(p) for p in paragraphs)


@functools.cache
def _zipf_vocabulary() -> tuple[tuple[str, ...], tuple[float, ...]]:
    """20,000 made-up words of one to four syllables and their Zipfian cumulative weights
    (rank r weighs 1/r**1.1, as word frequencies in English text roughly do)."""
    rng = random.Random(1_100)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ou")]
    words: set[str] = set()
    while len(words) < 20_000:
        words.add("".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 4)))))
    total, cumulative = 0.0, []
    for rank in range(1, len(words) + 1):
        total += rank**-1.1
        cumulative.append(total)
    ranked = sorted(words)
    rng.shuffle(ranked)  # frequency unrelated to spelling
    return tuple(ranked), tuple(cumulative)


def zipf_prose(rng: random.Random, tokens: int) -> str:
    """Sentences of 6 to 24 words drawn from a Zipfian vocabulary, about `tokens` o200k
    tokens: text whose 5-word windows are mostly its own, as in a real corpus (the pool's
    sentences share most of theirs)."""
    words, cumulative = _zipf_vocabulary()
    tokenizer = get_tokenizer(ENCODING)
    sentences: list[str] = []
    total = 0
    while total + 10 < tokens:
        drawn = rng.choices(words, cum_weights=cumulative, k=rng.randrange(6, 25))
        sentence = " ".join(drawn).capitalize() + "."
        sentences.append(sentence)
        total += tokenizer.count(" " + sentence)
    return " ".join(sentences)


def _exactly(tokens: int, seed: int) -> str:
    """A text of exactly `tokens` o200k tokens (the 607-token system prompt)."""
    tokenizer = get_tokenizer(ENCODING)
    rng = random.Random(seed)
    # No digits: a time or a date in a system prompt would (rightly) warn about the cache.
    plain = [s for s in _sentences() if not any(c.isdigit() for c in s)]
    words = " ".join(rng.choice(plain) for _ in range(tokens // 10)).split(" ")
    text = "You are the support assistant of an online shop. Answer from the sources."
    for word in words:
        longer = f"{text} {word}"
        if tokenizer.count(longer) > tokens:
            break
        text = longer
    return text


@functools.cache
def system_prompt() -> str:
    """The 607-token system prompt."""
    return _exactly(607, seed=607)


@functools.cache
def template() -> str:
    """The ~120-token boilerplate every chunk of a template workload opens with."""
    return prose(random.Random(120), 120)


def chunks(
    count: int,
    seed: int,
    *,
    counts: bool,
    oversize: bool = False,
    tokens: int = 415,
    embeddings: int = 0,
    templated: bool = False,
    zipf: bool = False,
) -> list[Chunk]:
    """`count` chunks of about `tokens` tokens, five per document, scores descending with noise.

    `counts`: each carries its exact o200k count, as an ingest pipeline would store it.
    `oversize`: the best-scored chunk is a 1 MB text, larger than any budget here.
    `embeddings`: each carries a random vector of this many dimensions (none similar).
    `templated`: each opens with the shared `template`, its own prose after it.
    `zipf`: the prose is `zipf_prose`, not the sentence pool's.
    """
    rng = random.Random(seed * 1_000_003 + count)
    vectors = random.Random(seed * 1_000_003 + count + 1)
    tokenizer = get_tokenizer(ENCODING)
    out = []
    for i in range(count):
        document = i // 5
        topic = _TOPICS[document % len(_TOPICS)]
        write = zipf_prose if zipf else prose
        text = write(rng, tokens - 120) if templated else write(rng, tokens)
        if templated:
            text = f"{template()}\n\n{text}"
        if oversize and i == 0:
            text = (text + "\n\n") * (1_000_000 // (len(text) + 2) + 1)
        out.append(
            Chunk(
                id=f"c{seed}-{i}",
                document_id=f"d{seed}-{document}",
                title=f"{topic} ({document})",
                heading_path=(topic, f"Part {i % 5 + 1}"),
                ordinal=i % 5,
                content=text,
                score=round(1 - i / count + rng.uniform(-0.05, 0.05), 6),
                updated_at=datetime(2024 if document % 9 == 0 else 2026, 1, 15, tzinfo=UTC),
                tokens=tokenizer.count(text) if counts and not (oversize and i == 0) else None,
                embedding=(
                    tuple(vectors.random() - 0.5 for _ in range(embeddings)) if embeddings else None
                ),
            )
        )
    return out


def history(turns: int, seed: int = 0) -> list[Turn]:
    """A conversation of `turns` turns of about 105 tokens, user and assistant alternating."""
    rng = random.Random(seed + 7)
    return [
        Turn(role="user" if i % 2 == 0 else "assistant", content=prose(rng, 105))
        for i in range(turns)
    ]


def budget() -> Budget:
    """6,000 tokens; system and question never trimmed, retrieval at most 3,000."""
    return Budget(
        total=6_000,
        allocations=[
            Allocation("system", max=700, priority=0),
            Allocation("question", max=200, priority=0),
            Allocation("retrieved", min=1_200, max=3_000, priority=1),
            Allocation("history", max=2_300, priority=2),
        ],
    )


def window_budget() -> Budget:
    """gpt-4.1's window, 8,000 tokens kept for the answer; retrieval up to 553,950 (the
    default split's share), system and question never trimmed."""
    return Budget.for_model(
        "gpt-4.1",
        reserve_output=8_000,
        allocations=[
            Allocation("system", max=700, priority=0),
            Allocation("question", max=200, priority=0),
            Allocation("retrieved", min=1_200, max=553_950, priority=1),
            Allocation("history", max=283_520, priority=2),
        ],
    )


def question(seed: int) -> str:
    """A question that differs per request."""
    rng = random.Random(seed)
    return f"Can {rng.choice(_SUBJECTS).lower()} get a refund {rng.choice(_TAILS)}? (#{seed})"


@dataclass(frozen=True)
class Workload:
    """One benchmark request shape; `request(seed)` gives that seed's inputs."""

    name: str
    candidates: int
    counts: bool
    oversize: bool = False
    turns: int = 20
    window: bool = False
    """Into a gpt-4.1 window (`window_budget`), chunks of ~370 tokens: all are kept."""
    embeddings: int = 0
    templated: bool = False
    followup: bool = False
    """Every request over seed 0's chunk texts, in new `Chunk` objects: a chat's next turn."""
    zipf: bool = False
    """Chunk prose from a Zipfian vocabulary (`zipf_prose`), windows mostly distinct."""

    def request(self, seed: int) -> Request:
        return Request(
            system=system_prompt(),
            question=question(seed),
            chunks=chunks(
                self.candidates,
                0 if self.followup else seed,
                counts=self.counts,
                oversize=self.oversize,
                tokens=370 if self.window else 415,
                embeddings=self.embeddings,
                templated=self.templated,
                zipf=self.zipf,
            ),
            history=history(self.turns),
        )

    def budget(self) -> Budget:
        """The budget this workload is assembled under."""
        return window_budget() if self.window else budget()


@dataclass(frozen=True)
class Request:
    """The inputs of one assembly."""

    system: str
    question: str
    chunks: list[Chunk]
    history: list[Turn]

    def assemble(self, assembler: ContextAssembler, **extra: Any) -> Assembled:
        """This request through `assembler` at the fixed reference time; `extra` adds the
        other claimants (tools, examples, memory)."""
        return assembler.assemble(
            system=self.system,
            question=self.question,
            chunks=self.chunks,
            history=self.history,
            now=NOW,
            **extra,
        )

    def with_chunks(self, chunks: list[Chunk]) -> Request:
        """The same request over other candidates."""
        return replace(self, chunks=chunks)


def _all() -> dict[str, Workload]:
    shapes = [
        Workload(f"{n} candidates", n, counts)
        for n in (10, 200, 1_000, 10_000)
        for counts in (True, False)
    ]
    shapes += [
        Workload("200 candidates + 1 MB chunk", 200, True, oversize=True),
        Workload("200 candidates + 1 MB chunk", 200, False, oversize=True),
        Workload("200 candidates, 200 turns", 200, True, turns=200),
        Workload("200 candidates, 200 turns", 200, False, turns=200),
    ]
    return {label(w): w for w in shapes}


def label(workload: Workload) -> str:
    """`name`, and whether counts come from ingest."""
    return f"{workload.name}, {'ingest counts' if workload.counts else 'no counts'}"


WORKLOADS: dict[str, Workload] = _all()
"""Every workload by label: the golden test covers all of them."""


def _windows() -> dict[str, Workload]:
    shapes = [
        Workload(f"{n:,} candidates, 1M window{kind}", n, True, window=True, **extra)
        for n in (500, 1_000, 2_000, 5_000)
        for kind, extra in (
            ("", {}),
            (", 1,536-dim embeddings", {"embeddings": 1_536}),
            (", shared template", {"templated": True}),
        )
    ]
    # Realistic prose: the pool's sentences share most 5-word windows across chunks.
    shapes += [
        Workload(
            f"{n:,} candidates, 1M window, Zipfian prose{kind}",
            n,
            True,
            window=True,
            zipf=True,
            **extra,
        )
        for n in (1_000, 2_000)
        for kind, extra in (("", {}), (", 1,536-dim embeddings", {"embeddings": 1_536}))
    ]
    return {label(w): w for w in shapes}


WINDOW_WORKLOADS: dict[str, Workload] = _windows()
"""The 1M-token window workloads by label (not golden: each takes seconds)."""

FOLLOWUPS: dict[str, Workload] = {
    label(w): w
    for w in (
        Workload("200 candidates, follow-up", 200, True, followup=True),
        Workload("200 candidates, follow-up", 200, False, followup=True),
    )
}
"""The seed request's next turns: the same chunk texts, new `Chunk` objects."""
