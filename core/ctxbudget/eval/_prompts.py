"""The prompts of an experiment, built by the real assembler under a budget that holds them.

An experiment measures the model, not the budget: unless the caller passes an
assembler of their own (whose budget is then part of what is measured), the budget
is computed from the texts so that every source fits, and `assembled_exactly`
checks that it did.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    Chunk,
    ContextAssembler,
    Dedup,
    SourceOptions,
    get_tokenizer,
)
from ctxbudget.eval._errors import EvalError
from ctxbudget.types import CountCache

__all__ = [
    "DEFAULT_SYSTEM",
    "DEFAULT_TOKENIZER",
    "Request",
    "assembled_exactly",
    "assembler_for",
    "check_sizes",
    "check_system",
]

DEFAULT_SYSTEM: Final = (
    "Answer the question from the sources alone, briefly, and cite the sources you use like [1]."
)
"""The system prompt experiments send unless given one."""

DEFAULT_TOKENIZER: Final = "o200k_base"
"""Counts tokens when no assembler is given (gpt-4o's encoding)."""

_PER_SOURCE: Final = 32
"""Tokens allowed per source for its [n] header and separators, beyond twice its texts."""
_FRAME: Final = 1_024
"""Tokens allowed for the fence notice, the fence rule and the question's frame."""


@dataclass(frozen=True)
class Request:
    """One prompt to build: a question and the chunks to send with it."""

    question: str
    chunks: tuple[Chunk, ...]


def assembler_for(
    assembler: ContextAssembler | None,
    system: str | None,
    requests: Iterable[Request],
    *,
    exact: bool,
) -> ContextAssembler:
    """The assembler an experiment builds its prompts with.

    `assembler` itself when given and not `exact`. Otherwise one with its tokenizer,
    source options and fence rule (or the defaults) and a budget every request fits in:
    twice the tokens of its texts, plus room for headers and frames. `exact` also fixes
    the arrangement to relevance order and turns off dedup, the relevance floor and
    escalation, so the sources are exactly the chunks given, in the rank order given.
    """
    if assembler is not None and not exact:
        return assembler
    tokenizer = (
        get_tokenizer(DEFAULT_TOKENIZER) if assembler is None else assembler.counter.tokenizer
    )
    sources = SourceOptions() if assembler is None else assembler.sources
    if exact:
        off = Dedup(jaccard=None, containment=None, cosine=None)
        sources = sources.model_copy(
            update={"order": "relevance", "dedup": off, "min_relevance": None, "loader": None}
        )
    counter = CountCache(tokenizer)

    def need(request: Request) -> int:
        texts = [system or "", request.question]
        for chunk in request.chunks:
            texts += [chunk.content, chunk.title or "", *chunk.heading_path, *chunk.parse_warnings]
        return 2 * sum(map(counter.count, texts)) + _PER_SOURCE * len(request.chunks)

    total = max(map(need, requests), default=0) + _FRAME
    return ContextAssembler(
        tokenizer=tokenizer,
        budget=Budget(total=total, allocations=(Allocation("retrieved", priority=1),)),
        sources=sources,
        fence_rule=True if assembler is None else assembler.fence_rule,
    )


def assembled_exactly(
    assembler: ContextAssembler, system: str | None, request: Request, where: str
) -> Assembled:
    """The prompt for `request`, whose sources must be its chunks in their rank order.

    Chunks get descending rerank scores so relevance order is the order given. A chunk
    the assembler left out (an ACL, no visible text) is an `EvalError`, never a silently
    easier or harder prompt.
    """
    ranked = [
        c.model_copy(update={"rerank_score": float(len(request.chunks) - i)})
        for i, c in enumerate(request.chunks)
    ]
    prompt = assembler.assemble(system=system, question=request.question, chunks=ranked)
    if [s.chunk.id for s in prompt.sources] != [c.id for c in ranked]:
        dropped = ", ".join(f"{d.id!r} ({d.reason})" for d in prompt.report.dropped)
        raise EvalError(
            f"{where}: the prompt must hold all {len(ranked)} chunks in order, but the assembler "
            f"left out {dropped}; the experiment sends chunks without a principal, so remove "
            "chunks with an ACL (tenant, groups) or no visible text from the pool and the cases"
        )
    return prompt


def check_system(system: object) -> str | None:
    """`system` when it is a str or None; `EvalError` otherwise."""
    if system is not None and not isinstance(system, str):
        raise EvalError(f"system must be a str or None, but got {type(system).__name__}")
    return system


def check_sizes(name: str, values: Sequence[int], minimum: int) -> tuple[int, ...]:
    """`values` as a tuple of distinct ints >= `minimum`; `EvalError` names the bad one."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
        raise EvalError(f"{name} must be a non-empty sequence of ints, but got {values!r}")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise EvalError(f"{name} must be ints >= {minimum}, but got {value!r}")
    if len(set(values)) < len(values):
        raise EvalError(f"{name} must not repeat a value, but got {list(values)}")
    return tuple(values)
