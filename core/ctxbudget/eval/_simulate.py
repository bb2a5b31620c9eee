"""A deterministic, position-biased stand-in for a model, and a synthetic corpus to try it on.

`simulated_generator` reads an assembled prompt's sources and skips each with a
known probability that peaks in the middle of long contexts ("lost in the middle");
of the sources it read, it answers from the one sharing most words with the
question. Its bias is known, so a test can check the harness recovers it, and anyone
can try the experiments without an API key.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime
from typing import Final

from ctxbudget import Chunk
from ctxbudget.eval._cases import Case
from ctxbudget.eval._errors import EvalError
from ctxbudget.eval._retrieve import words

__all__ = ["SimulatedModel", "simulated_generator", "synthetic_corpus"]

_FENCE: Final = "<retrieved_documents>"
_QUESTION: Final = "\nQuestion: "
NOT_FOUND: Final = "I cannot find the answer in the sources."


class SimulatedModel:
    """Answers from the sources it reads; misses source i of N with `miss_rate(i/(N-1), N)`."""

    def __init__(self, *, bias: float, saturation: int, seed: int) -> None:
        self.bias = bias
        self.saturation = saturation
        self.seed = seed
        self.model_id = f"simulated(bias={bias:g}, saturation={saturation}, seed={seed})"
        """Keys cached answers: a change of bias, saturation or seed is another model."""

    def miss_rate(self, position: float, sources: int) -> float:
        """The chance of skipping the source at relative `position` (0 first, 1 last) of
        `sources`: ``bias * 4p(1-p) * min(1, (sources-1)/(saturation-1))`` — none at the
        ends, `bias` in the middle once the prompt holds `saturation` sources."""
        depth = min(1.0, (sources - 1) / (self.saturation - 1))
        return self.bias * 4 * position * (1 - position) * depth

    def __call__(self, prompt: str) -> str:
        question = set(words(prompt.rpartition(_QUESTION)[2]))
        sources = _sources(prompt)
        last = max(len(sources) - 1, 1)
        key = hashlib.sha256(f"{self.seed}\0{prompt}".encode()).digest()
        read = [
            (n, text)
            for n, text in enumerate(sources, 1)
            if _draw(key, n) >= self.miss_rate((n - 1) / last, len(sources))
        ]
        if not read:
            return NOT_FOUND
        n, text = max(read, key=lambda r: (len(question & set(words(r[1]))), -r[0]))
        return f"{text.partition(chr(10))[2].strip()} [{n}]"

    def __repr__(self) -> str:
        return f"SimulatedModel(bias={self.bias:g}, saturation={self.saturation}, seed={self.seed})"


def simulated_generator(
    *, bias: float = 0.4, saturation: int = 60, seed: int = 0
) -> SimulatedModel:
    """A deterministic model with a known lost-in-the-middle bias (see `SimulatedModel`).

    `bias` is the chance of missing the middle source of a prompt with `saturation` or
    more sources; shorter prompts are missed proportionally less, the ends never.
    """
    if isinstance(bias, bool) or not isinstance(bias, int | float) or not 0 <= bias <= 1:
        raise EvalError(f"bias must be a number from 0 to 1, but got {bias!r}")
    if isinstance(saturation, bool) or not isinstance(saturation, int) or saturation < 2:
        raise EvalError(f"saturation must be an int >= 2, but got {saturation!r}")
    return SimulatedModel(bias=bias, saturation=saturation, seed=seed)


def _draw(key: bytes, n: int) -> float:
    """A uniform draw in [0, 1) fixed by `key` (seed and prompt) and the source number."""
    digest = hashlib.sha256(key + n.to_bytes(4, "big")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _sources(prompt: str) -> list[str]:
    """The texts of the sources [1], [2], ... of an assembled prompt (markdown or XML)."""
    sources: list[list[str]] = []
    inside = False
    for line in prompt.split("\n"):
        if line == _FENCE:
            inside = True
        elif line == f"</{_FENCE[1:]}":
            inside = False
        elif inside and line.startswith(
            (f"[{len(sources) + 1}]", f'<document index="{len(sources) + 1}"')
        ):
            sources.append([line])
        elif inside and sources and line != "</document>":
            sources[-1].append(line)
    return ["\n".join(lines) for lines in sources]


_COLOURS: Final = (
    "amber", "cobalt", "coral", "crimson", "indigo", "ivory", "jade", "ochre",
    "olive", "saffron", "scarlet", "silver", "slate", "teal", "umber", "violet",
)  # fmt: skip
_ANIMALS: Final = (
    "badger", "bison", "egret", "falcon", "gecko", "heron", "ibex", "lynx",
    "marten", "newt", "osprey", "otter", "stoat", "tapir", "vole", "wren",
)  # fmt: skip
_PLACES: Final = ("north gate", "old mill", "river bend", "pine ridge", "east quay", "salt marsh")


def synthetic_corpus(
    *, cases: int = 40, pool: int = 120, seed: int = 0
) -> tuple[list[Case], list[Chunk]]:
    """`cases` questions and a `pool` of field-note chunks, the first `cases` of them gold.

    Each chunk says where one animal keeps its key ("locker 4417"), with a title and
    heading path; every 5th is stale (updated 2020) and every 7th has a parse warning,
    so each ablation variant changes some prompts. Deterministic for a seed.
    """
    names = [(c, a) for c in _COLOURS for a in _ANIMALS]
    if not 1 <= cases <= pool <= len(names):
        raise EvalError(
            f"synthetic_corpus needs 1 <= cases <= pool <= {len(names)}, but got cases={cases}, "
            f"pool={pool}"
        )
    rng = random.Random(seed)
    chosen = rng.sample(names, pool)
    lockers = rng.sample(range(1_000, 10_000), pool)
    chunks = [
        Chunk(
            id=f"note-{i:03d}",
            title=f"Field notes: the {colour} {animal}",
            heading_path=("Field notes", colour.title()),
            content=f"The {colour} {animal} keeps its spare key in locker {locker}. It was "
            f"last seen near the {rng.choice(_PLACES)}.",
            updated_at=datetime(2020, 1, 1, tzinfo=UTC) if i % 5 == 4 else None,
            parse_warnings=("OCR confidence 0.62",) if i % 7 == 6 else (),
        )
        for i, ((colour, animal), locker) in enumerate(zip(chosen, lockers, strict=True))
    ]
    questions = [
        Case(
            id=f"q{i:03d}",
            question=f"Where does the {colour} {animal} keep its spare key?",
            keywords=(f"locker {locker}",),
            gold=chunks[i],
        )
        for i, ((colour, animal), locker) in enumerate(zip(chosen[:cases], lockers, strict=False))
    ]
    return questions, chunks
