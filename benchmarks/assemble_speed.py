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

from ctxbudget import Budget, Chunk, ContextAssembler, Tool, Turn, get_tokenizer

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
    budget = Budget.default(total=6_500, reserve_output=500)
    history = [Turn(role="user", content="Earlier question about returns " * 5)]
    tools = [Tool(name="lookup_order", description="Find an order by number.")]
    system = "Answer from the sources and cite them like [1]."

    # Fresh texts for every repetition, so no count is served from a warm cache.
    with_counts = [corpus(args.candidates, seed, with_tokens=True) for seed in range(args.repeat)]
    without = [corpus(args.candidates, 1_000 + s, with_tokens=False) for s in range(args.repeat)]

    def assemble(chunks: list[Chunk]) -> str:
        assembler = ContextAssembler(tokenizer=tokenizer, budget=budget)
        return assembler.assemble(
            system=system,
            question="What is the refund period?",
            chunks=chunks,
            history=history,
            tools=tools,
        ).text

    prompts = [assemble(c) for c in with_counts[:3]]
    size = tokenizer.count(prompts[0])

    one_pass = best_of(args.repeat, lambda i: tokenizer.encoding.encode_ordinary(prompts[i % 3]))
    ingest = best_of(args.repeat, lambda i: assemble(with_counts[i]))
    cold = best_of(args.repeat, lambda i: assemble(without[i]))

    def naive(i: int) -> None:
        for chunk in without[i]:
            tokenizer.encoding.encode_ordinary(chunk.content)
        tokenizer.encoding.encode_ordinary(prompts[i % 3])

    naive_time = best_of(args.repeat, naive)
    print(f"prompt: {size:,} tokens from {args.candidates} candidates; medians of {args.repeat}")
    print(f"one tokenizer pass over the prompt  {one_pass * 1e3:8.2f} ms   1.00x")
    for label, seconds in (
        ("assemble, counts from ingest", ingest),
        ("assemble, no counts given", cold),
        ("naive: count every candidate", naive_time),
    ):
        print(f"{label:<36}{seconds * 1e3:8.2f} ms  {seconds / one_pass:5.2f}x")


if __name__ == "__main__":
    main()
