"""How much one assembly costs, as a ratio to one tokenizer pass over the prompt it produces.

DESIGN's target: assembling a ~6k-token prompt from 200 candidates costs no more than
one tokenizer pass over the output when counts come from ingest, and at most 2x that
when they do not; counting every candidate (the naive way) is ~20x.

Everything is measured in the same run, so the ratios hold on any machine:

    python benchmarks/assemble_speed.py [--candidates 200] [--repeat 30]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from ctxbudget import (
    Allocation,
    Budget,
    Chunk,
    ContextAssembler,
    TiktokenTokenizer,
    Tokenizer,
    Tool,
    Turn,
    get_tokenizer,
)

WORDS = [
    "policy",
    "return",
    "refund",
    "customer",
    "order",
    "shipping",
    "warranty",
    "invoice",
    "delivery",
    "account",
    "payment",
    "region",
    "store",
    "item",
    "defect",
    "exchange",
    "period",
    "receipt",
    "label",
    "carrier",
    "tracking",
    "support",
    "contract",
    "renewal",
    "notice",
    "clause",
    "section",
    "annex",
    "schedule",
    "tariff",
    "discount",
]


def corpus(n: int, seed: int, *, with_tokens: bool) -> list[Chunk]:
    rng = random.Random(seed)
    tokenizer = get_tokenizer("o200k_base")
    chunks = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(180))
        chunks.append(
            Chunk(
                id=f"s{seed}-c{i}",
                document_id=f"s{seed}-d{i % 40}",
                title=f"Document {i % 40}",
                heading_path=("Section", f"Part {i % 7}"),
                ordinal=i // 40,
                content=text,
                score=1 - i / n,
                tokens=tokenizer.count(text) if with_tokens else None,
            )
        )
    return chunks


def best_of(repeat: int, run: Callable[[int], object]) -> float:
    times = []
    for i in range(repeat):
        start = time.perf_counter()
        run(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()

    tokenizer = get_tokenizer("o200k_base")
    budget = Budget(
        total=7_000,
        reserve_output=500,
        allocations=[
            Allocation("system", max=600, priority=0),
            Allocation("question", max=200, priority=0),
            Allocation("retrieved", min=1_200, max=5_500, priority=1),
            Allocation("tools", max=600, priority=2),
            Allocation("history", max=600, priority=3),
        ],
    )
    history = [Turn(role="user", content="Earlier question about returns " * 5)]
    tools = [Tool(name="lookup_order", description="Find an order by number.")]
    system = "Answer from the sources and cite them like [1]."

    # Fresh texts for every repetition, so no count is served from a warm cache.
    with_counts = [corpus(args.candidates, seed, with_tokens=True) for seed in range(args.repeat)]
    without = [corpus(args.candidates, 1_000 + s, with_tokens=False) for s in range(args.repeat)]

    def assemble(chunks: list[Chunk], counter: Tokenizer = tokenizer) -> str:
        assembler = ContextAssembler(tokenizer=counter, budget=budget)
        return assembler.assemble(
            system=system,
            question="What is the refund period?",
            chunks=chunks,
            history=history,
            tools=tools,
        ).text

    prompts = [assemble(c) for c in with_counts[:3]]
    size = tokenizer.count(prompts[0])

    # Tokenizer work: characters handed to the tokenizer, per character of the prompt.
    fresh = [corpus(args.candidates, 5_000 + s, with_tokens=s == 0) for s in range(2)]
    work = []
    for chunks in fresh:
        spy = Spy(tokenizer)
        prompt = assemble(chunks, spy)
        work.append(spy.chars / len(prompt))

    one_pass = best_of(args.repeat, lambda i: tokenizer.encoding.encode_ordinary(prompts[i % 3]))
    ingest = best_of(args.repeat, lambda i: assemble(with_counts[i]))
    cold = best_of(args.repeat, lambda i: assemble(without[i]))

    def naive(i: int) -> None:
        for chunk in without[i]:
            tokenizer.encoding.encode_ordinary(chunk.content)
        tokenizer.encoding.encode_ordinary(prompts[i % 3])

    naive_time = best_of(args.repeat, naive)
    naive_work = (sum(len(c.content) for c in without[0]) + len(prompts[0])) / len(prompts[0])
    print(f"prompt: {size:,} tokens from {args.candidates} candidates; medians of {args.repeat}")
    print(f"{'':<36}{'wall':>8}   {'ratio':>6}   tokenizer work")
    print(f"{'one tokenizer pass over the prompt':<36}{one_pass * 1e3:6.2f} ms   1.00x   1.00x")
    for label, seconds, chars in (
        ("assemble, counts from ingest", ingest, work[0]),
        ("assemble, no counts given", cold, work[1]),
        ("naive: count every candidate", naive_time, naive_work),
    ):
        print(f"{label:<36}{seconds * 1e3:6.2f} ms  {seconds / one_pass:5.2f}x  {chars:5.2f}x")


class Spy:
    """A tokenizer that adds up how many characters it was asked to count."""

    def __init__(self, inner: TiktokenTokenizer) -> None:
        self.inner = inner
        self.name = inner.name
        self.max_token_bytes = inner.max_token_bytes
        self.chars = 0

    def count(self, text: str) -> int:
        self.chars += len(text)
        return self.inner.count(text)


if __name__ == "__main__":
    main()
