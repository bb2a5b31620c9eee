"""Assembly speed side by side: ctxbudget and its peers, as ratios to one tokenizer pass.

Every number comes from the same process and run, so the ratios hold on any machine:
the reference is one tiktoken ``encode_ordinary`` of the prompt ctxbudget returns. Each
method's output is counted with that same tokenizer and its compliance printed beside
its time. Inputs are fresh for every repetition (no count can come from an earlier
request's cache), built before the clock starts; an assembler or helper is built once
and reused, as an app would.

    python -m benchmarks.compare                # everything, medians of 15
    python -m benchmarks.compare --repeat 5     # quicker
    python -m benchmarks.compare --only peers   # or: scaling, dedup, repack, memory,
                                                # window, followup

Peers that are not installed are skipped with a note: they come with
``pip install -e '.[langchain,llamaindex,offline]' --group bench`` (pip >= 25.1).
Times are CPU time of this process (``time.process_time``), so other load on the machine
does not move them; ``--clock wall`` uses ``time.perf_counter`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib.util
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import tiktoken
import tiktoken.registry

from benchmarks.workloads import (
    ENCODING,
    FOLLOWUPS,
    WINDOW_WORKLOADS,
    WORKLOADS,
    Request,
    Workload,
    label,
)
from ctxbudget import ContextAssembler, Dedup, SourceOptions, get_tokenizer
from ctxbudget._sources.dedup import shingles

BUDGET = 6_000
RETRIEVED = 3_000
HISTORY = 2_300

ENCODER = get_tokenizer(ENCODING).encoding
# Peers ask tiktoken for the encoding by name, which downloads it; hand them the one the
# offline extra already loaded (the same vocabulary, checked against tiktoken's sha256).
tiktoken.registry.ENCODINGS.setdefault(ENCODING, ENCODER)


def tokens(text: str) -> int:
    return len(ENCODER.encode_ordinary(text))


@dataclass
class Row:
    """One method's medians on one workload."""

    method: str
    seconds: float
    ratio: float
    output: int
    limit: int
    note: str = ""

    def compliance(self) -> str:
        over = self.output - self.limit
        return "within" if over <= 0 else f"{over:,} over"


Clock = Callable[[], float]


def timed(
    clock: Clock, run: Callable[[int], Any], reference: Callable[[int], Any], repeat: int
) -> tuple[float, float, Any]:
    """Median seconds of `run(i)`, median ratio to `reference(i)` timed just before it, for
    i in 1..repeat (0 warms up), and the result of the last.

    Each ratio is of two runs a moment apart, so a slower phase of the machine moves both.
    Every method's output is counted on the same request, the last one.
    """
    run(0)
    reference(0)
    times, ratios = [], []
    result = None
    for index in range(1, repeat + 1):
        gc.collect()  # before each of the two, so that both start alike
        start = clock()
        reference(index)
        took = clock() - start
        gc.collect()
        start = clock()
        result = run(index)
        times.append(clock() - start)
        ratios.append(times[-1] / took)
    return statistics.median(times), statistics.median(ratios), result


def each(method: Callable[[Any], Any], items: list[Any]) -> Callable[[int], Any]:
    """`method` on the i-th item: one repetition of a timed run."""
    return lambda index: method(items[index])


# --- the methods ---------------------------------------------------------------------------------


NO_DEDUP = SourceOptions(dedup=Dedup(jaccard=None, containment=None, cosine=None))
"""Near-duplicate detection off: what the rest of the pipeline costs without it."""


def ctxbudget_method(
    workload: Workload, sources: SourceOptions | None = None
) -> Callable[[Request], str]:
    assembler = ContextAssembler(tokenizer=ENCODING, budget=workload.budget(), sources=sources)

    def run(request: Request) -> str:
        return request.assemble(assembler).text

    return run


def naive(request: Request, retrieved: int = RETRIEVED, history: int = HISTORY) -> str:
    """Count every chunk (or trust its ingest count) and turn, take greedily by score and
    recency, join, and count the prompt once."""
    sources: list[str] = []
    used = 0
    for chunk in sorted(request.chunks, key=lambda c: -(c.score or 0.0)):
        size = chunk.tokens if chunk.tokens is not None else tokens(chunk.content)
        if used + size <= retrieved:
            sources.append(chunk.content)
            used += size
    turns: list[str] = []
    used = 0
    for turn in reversed(request.history):
        size = tokens(turn.content)
        if used + size > history:
            break
        turns.insert(0, f"{turn.role}: {turn.content}")
        used += size
    prompt = "\n\n".join([request.system, *turns, *sources, f"Question: {request.question}"])
    tokens(prompt)  # the final check a careful implementation makes
    return prompt


def llamaindex_repack() -> Callable[[Request], str] | None:
    if importlib.util.find_spec("llama_index") is None:
        return None
    from llama_index.core import PromptHelper
    from llama_index.core.prompts import PromptTemplate

    template = PromptTemplate("Context:\n{context_str}\n")
    helper = PromptHelper(
        context_window=RETRIEVED + tokens("Context:\n\n"),  # the sources get RETRIEVED
        num_output=0,
        chunk_overlap_ratio=0.0,
        tokenizer=ENCODER.encode_ordinary,
    )

    def run(request: Request) -> str:
        ranked = sorted(request.chunks, key=lambda c: -(c.score or 0.0))
        packed = helper.repack(template, [c.content for c in ranked], padding=0)
        return packed[0]  # what the first LLM call of a compact synthesis reads

    return run


def langchain_trim() -> Callable[[Request], str] | None:
    if importlib.util.find_spec("langchain_core") is None:
        return None
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, trim_messages

    def count(messages: list[BaseMessage]) -> int:
        return sum(tokens(str(m.content)) for m in messages)

    def run(request: Request) -> str:
        messages: list[BaseMessage] = [
            HumanMessage(t.content) if t.role == "user" else AIMessage(t.content)
            for t in request.history
        ]
        kept = trim_messages(
            messages, max_tokens=HISTORY, token_counter=count, strategy="last", start_on="human"
        )
        return "\n\n".join(str(m.content) for m in kept)

    return run


def priompt_render() -> Callable[[Request], str] | None:
    if importlib.util.find_spec("priompt") is None:
        return None
    import priompt

    def run(request: Request) -> str:
        ranked = sorted(request.chunks, key=lambda c: -(c.score or 0.0))
        turns = len(request.history)
        element = [
            priompt.SystemMessage(request.system),
            *[
                priompt.Scope(
                    priompt.UserMessage(t.content)
                    if t.role == "user"
                    else priompt.AssistantMessage(t.content),
                    prel=-(turns - i),
                )
                for i, t in enumerate(request.history)
            ],
            priompt.UserMessage(
                priompt.Isolate(
                    *[priompt.Scope(c.content + "\n\n", prel=-i) for i, c in enumerate(ranked)],
                    token_limit=RETRIEVED,
                ),
                f"Question: {request.question}",
            ),
        ]
        out = priompt.render(element, {"token_limit": BUDGET, "tokenizer": priompt.O200KTokenizer})
        return "\n\n".join(_content(m) for m in out["prompt"]["messages"])

    return run


def _content(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else "".join(map(str, content))


def priomptipy_render() -> Callable[[Request], str] | None:
    if importlib.util.find_spec("priomptipy") is None:
        return None
    import priomptipy
    from priomptipy.prompt_types import Isolate

    def run(request: Request) -> str:
        ranked = sorted(request.chunks, key=lambda c: -(c.score or 0.0))
        turns = len(request.history)
        element = [
            priomptipy.SystemMessage(request.system),
            *[
                priomptipy.Scope(
                    [
                        priomptipy.UserMessage(t.content)
                        if t.role == "user"
                        else priomptipy.AssistantMessage(t.content)
                    ],
                    relative_priority=-(turns - i),
                )
                for i, t in enumerate(request.history)
            ],
            priomptipy.UserMessage(
                [
                    Isolate(
                        token_limit=RETRIEVED,
                        children=[
                            priomptipy.Scope([c.content + "\n\n"], relative_priority=-i)
                            for i, c in enumerate(ranked)
                        ],
                    ),
                    f"Question: {request.question}",
                ]
            ),
        ]
        out = asyncio.run(
            priomptipy.render(element, {"token_limit": BUDGET, "tokenizer": ENCODING})
        )
        return "\n\n".join(_content(m) for m in out["prompt"]["messages"])

    return run


def haystack_pipeline() -> Callable[[Request], str] | None:
    if importlib.util.find_spec("haystack") is None:
        return None
    from haystack import Document
    from haystack.components.builders import PromptBuilder
    from haystack.components.rankers import LostInTheMiddleRanker

    # Haystack caps by words, not tokens: about 0.75 words a token in English prose.
    ranker = LostInTheMiddleRanker(word_count_threshold=int(RETRIEVED * 0.75))
    builder = PromptBuilder(
        template=(
            "{{ system }}\n\n{% for turn in history %}{{ turn }}\n\n{% endfor %}"
            "{% for document in documents %}{{ document.content }}\n\n{% endfor %}"
            "Question: {{ question }}"
        ),
        required_variables=["system", "history", "documents", "question"],
    )

    def run(request: Request) -> str:
        ranked = sorted(request.chunks, key=lambda c: -(c.score or 0.0))
        documents = [Document(content=c.content, score=c.score) for c in ranked]
        kept = ranker.run(documents=documents)["documents"]
        history = [f"{t.role}: {t.content}" for t in request.history]
        prompt: str = builder.run(
            system=request.system, history=history, documents=kept, question=request.question
        )["prompt"]
        return prompt

    return run


# --- the tables ----------------------------------------------------------------------------------


def peers(repeat: int, clock: Clock) -> None:
    """The 200-candidate request by every method, counts given at ingest and not."""
    for counts in (True, False):
        workload = WORKLOADS[label(Workload("200 candidates", 200, counts))]
        requests = [workload.request(seed) for seed in range(repeat + 1)]
        # The reference prompts come from an assembler of their own: the timed one starts cold.
        prompts = [ctxbudget_method(workload)(r) for r in requests]
        encode = each(ENCODER.encode_ordinary, prompts)
        reference, _, _ = timed(clock, encode, encode, repeat)
        own = ctxbudget_method(workload)
        rows = []
        seconds, ratio, out = timed(clock, each(own, requests), encode, repeat)
        rows.append(Row("ctxbudget ContextAssembler.assemble", seconds, ratio, tokens(out), BUDGET))
        seconds, ratio, out = timed(clock, each(naive, requests), encode, repeat)
        what = "trusts ingest counts" if counts else ""
        rows.append(
            Row("naive: count every chunk, take, join", seconds, ratio, tokens(out), BUDGET, what)
        )
        for name, make, limit, note in (
            ("LlamaIndex PromptHelper.repack", llamaindex_repack, RETRIEVED, "sources only"),
            ("LangChain trim_messages", langchain_trim, HISTORY, "history only"),
            ("priompt render", priompt_render, BUDGET, ""),
            ("priomptipy render", priomptipy_render, BUDGET, ""),
            (
                "Haystack LostInTheMiddleRanker + PromptBuilder",
                haystack_pipeline,
                BUDGET,
                "caps words",
            ),
        ):
            if counts:
                continue  # no peer takes counts measured at ingest
            method = make()
            if method is None:
                print(
                    f"  (skipped {name}: not installed; "
                    "pip install -e '.[langchain,llamaindex,offline]' --group bench)"
                )
                continue
            seconds, ratio, out = timed(clock, each(method, requests), encode, repeat)
            rows.append(Row(name, seconds, ratio, tokens(out), limit, note))
        given = "counts given at ingest" if counts else "no counts given"
        print_table(f"{workload.name}, {given}", reference, tokens(prompts[-1]), rows)


def scaling(repeat: int, clock: Clock) -> None:
    """ctxbudget alone over every workload, against one encode of its output."""
    rows: list[tuple[str, float, float, float, int]] = []
    for name, workload in WORKLOADS.items():
        reps = max(3, repeat // 3) if workload.candidates >= 10_000 else repeat
        requests = [workload.request(seed) for seed in range(reps + 1)]
        prompts = [ctxbudget_method(workload)(r) for r in requests]
        encode = each(ENCODER.encode_ordinary, prompts)
        reference, _, _ = timed(clock, encode, encode, reps)
        own = ctxbudget_method(workload)
        seconds, ratio, out = timed(clock, each(own, requests), encode, reps)
        rows.append((name, seconds, reference, ratio, tokens(out)))
    base = {
        name.endswith("ingest counts"): ratio
        for name, _, _, ratio, _ in rows
        if name in ("200 candidates, ingest counts", "200 candidates, no counts")
    }
    print(
        "\nctxbudget by workload (medians; ratio to one encode of its own output, and that "
        "ratio against the 200-candidate case with the same counts)\n"
    )
    print("| workload | assemble | one encode | x encode | x 200 candidates | prompt tokens |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, seconds, reference, ratio, size in rows:
        per = ratio / base[name.endswith("ingest counts")]
        print(
            f"| {name} | {seconds * 1e3:.2f} ms | {reference * 1e3:.2f} ms | "
            f"{ratio:.2f}x | {per:.2f}x | {size:,} |"
        )


def dedup_cost(repeat: int, clock: Clock) -> None:
    """The 200-candidate request with near-duplicate detection on (the default) and off, and
    the 5-word windows of one chunk against one encode of that chunk."""
    print(
        "\nWhat near-duplicate detection costs (200 candidates; medians; ratio to one encode "
        "of the output)\n"
    )
    print("| counts | dedup on (default) | dedup off | difference |")
    print("|---|---:|---:|---:|")
    for counts in (True, False):
        workload = WORKLOADS[label(Workload("200 candidates", 200, counts))]
        requests = [workload.request(seed) for seed in range(repeat + 1)]
        prompts = [ctxbudget_method(workload)(r) for r in requests]
        encode = each(ENCODER.encode_ordinary, prompts)
        ratios = [
            timed(clock, each(ctxbudget_method(workload, sources), requests), encode, repeat)[1]
            for sources in (None, NO_DEDUP)
        ]
        given = "ingest counts" if counts else "no counts"
        print(f"| {given} | {ratios[0]:.2f}x | {ratios[1]:.2f}x | {ratios[0] - ratios[1]:.2f}x |")
    texts = [chunk.content for chunk in WORKLOADS["200 candidates, no counts"].request(1).chunks]
    encode_one = each(ENCODER.encode_ordinary, texts)
    seconds, ratio, _ = timed(clock, each(shingles, texts), encode_one, min(repeat, len(texts) - 1))
    print(
        f"\nThe 5-word windows of one ~415-token chunk: {seconds * 1e6:.0f} us, {ratio:.2f}x one "
        "encode of the same chunk"
    )


def repack_cost(repeat: int, clock: Clock) -> None:
    """`ContextBudgetPromptHelper.repack` of 250, 500 and 1,000 texts (a 4,096-token window):
    its time against one encode of the same texts, and against the 250-text case."""
    if importlib.util.find_spec("llama_index") is None:
        print("\n(repack skipped: pip install -e '.[llamaindex]')")
        return
    from llama_index.core.prompts import PromptTemplate

    from llamaindex_ctxbudget import ContextBudgetPromptHelper

    template = PromptTemplate("Context:\n{context_str}\nQuestion: What now?\nAnswer: ")
    print(
        "\nContextBudgetPromptHelper.repack, plain texts of ~50 tokens into a 4,096-token "
        "window (medians; ratio to one encode of the texts joined)\n"
    )
    print("| texts | time | x one encode | x the 250 case | contexts |")
    print("|---:|---:|---:|---:|---:|")
    first = 0.0
    for n in (250, 500, 1_000):
        note = "Note {}.{}: the depot in city {} opens at {}. "
        batches = [
            [note.format(seed, i, i, i % 12 + 6) * 3 for i in range(n)]
            for seed in range(repeat + 1)
        ]
        encode = each(lambda texts: ENCODER.encode_ordinary("\n\n".join(texts)), batches)

        def pack(texts: list[str]) -> list[str]:
            helper = ContextBudgetPromptHelper(
                tokenizer=ENCODING, context_window=4_096, num_output=256
            )
            return helper.repack(template, texts)

        seconds, ratio, packed = timed(clock, each(pack, batches), encode, repeat)
        first = first or seconds
        print(
            f"| {n:,} | {seconds * 1e3:.1f} ms | {ratio:.2f}x | {seconds / first:.2f}x | "
            f"{len(packed)} |"
        )


def window(repeat: int, clock: Clock) -> None:
    """1M-token windows: 500 to 5,000 candidates into gpt-4.1's budget (all kept until the
    window is full), plain, with 1,536-dim embeddings, or with a shared template; dedup on
    and off, and the naive count-all, each against one encode of ctxbudget's output."""
    reps = max(3, min(repeat, 5))
    print(
        f"\n1M-token window (gpt-4.1 budget, retrieval up to 553,950 tokens; chunks of ~370 "
        f"tokens with ingest counts; medians of {reps}; ratio to one encode of ctxbudget's "
        "output)\n"
    )
    print(
        "| workload | kept | prompt tokens | one encode | dedup on | x encode | dedup off | "
        "x encode | naive count-all | x encode |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workload in WINDOW_WORKLOADS.values():
        requests = [workload.request(seed) for seed in range(reps + 1)]
        # The reference prompts come from an assembler of their own: the timed one starts cold.
        reference_assembler = ContextAssembler(tokenizer=ENCODING, budget=workload.budget())
        results = [r.assemble(reference_assembler) for r in requests]
        last = results[-1]
        encode = each(ENCODER.encode_ordinary, [r.text for r in results])
        reference, _, _ = timed(clock, encode, encode, reps)
        cells = []
        for sources in (None, NO_DEDUP):
            seconds, ratio, _ = timed(
                clock, each(ctxbudget_method(workload, sources), requests), encode, reps
            )
            cells.append(f"{seconds:.3f} s | {ratio:.2f}x")
        limits = {a.name: a.max or 0 for a in workload.budget().allocations}
        count_all = each(
            functools.partial(naive, retrieved=limits["retrieved"], history=limits["history"]),
            requests,
        )
        seconds, ratio, _ = timed(clock, count_all, encode, reps)
        cells.append(f"{seconds:.3f} s | {ratio:.2f}x")
        print(
            f"| {workload.name} | {len(last.sources):,} | {tokens(last.text):,} | "
            f"{reference * 1e3:.1f} ms | {' | '.join(cells)} |"
        )
    print(
        "\n(LlamaIndex PromptHelper.repack is not run at this size: it takes 0.8 s for 200 "
        "chunks into 3,000 tokens; priompt is run only where installed, in the peers table.)"
    )


def followup(repeat: int, clock: Clock) -> None:
    """The seed request's next turns: the same chunk texts in new `Chunk` objects, one
    assembler (its caches warm from the turn before), against a request of new texts."""
    print(
        "\nA follow-up request: the same 200 chunk texts in new Chunk objects, one assembler "
        "(medians; ratio to one encode of the output)\n"
    )
    print("| counts | new texts every request | follow-up over the same texts |")
    print("|---|---:|---:|")
    for counts in (True, False):
        ratios = []
        for workload in (
            WORKLOADS[label(Workload("200 candidates", 200, counts))],
            FOLLOWUPS[label(Workload("200 candidates, follow-up", 200, counts, followup=True))],
        ):
            requests = [workload.request(seed) for seed in range(repeat + 1)]
            prompts = [ctxbudget_method(workload)(r) for r in requests]
            encode = each(ENCODER.encode_ordinary, prompts)
            ratios.append(
                timed(clock, each(ctxbudget_method(workload), requests), encode, repeat)[1]
            )
        given = "ingest counts" if counts else "no counts"
        print(f"| {given} | {ratios[0]:.2f}x | {ratios[1]:.2f}x |")


def print_table(title: str, reference: float, size: int, rows: list[Row]) -> None:
    print(f"\n{title} (medians; prompt of {size:,} tokens; budget {BUDGET:,})\n")
    print("| method | time | x one encode | output tokens | limit | compliance |")
    print("|---|---:|---:|---:|---:|---|")
    print(
        f"| one tiktoken encode of ctxbudget's prompt | {reference * 1e3:.2f} ms | 1.00x | "
        f"{size:,} | | |"
    )
    for row in rows:
        note = f" ({row.note})" if row.note else ""
        print(
            f"| {row.method}{note} | {row.seconds * 1e3:.2f} ms | "
            f"{row.ratio:.2f}x | {row.output:,} | {row.limit:,} | "
            f"{row.compliance()} |"
        )


# --- memory --------------------------------------------------------------------------------------


def _status(field: str) -> int:
    """A size from /proc/self/status (``VmRSS``, ``VmHWM``), in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def memory_probe(name: str, traced: bool) -> dict[str, int]:
    """In this fresh process: the memory the inputs of workload `name` take and what one
    assembly adds at its peak, as RSS (the peak reset after the inputs are built) or as
    traced allocations."""
    workload = {**WORKLOADS, **WINDOW_WORKLOADS}[name]
    own = ctxbudget_method(workload)
    own(WORKLOADS[label(Workload("10 candidates", 10, True))].request(99))  # warm up
    gc.collect()
    if traced:
        tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0] if traced else _status("VmRSS")
    request = workload.request(1)
    gc.collect()
    inputs = tracemalloc.get_traced_memory()[0] if traced else _status("VmRSS")
    if traced:
        tracemalloc.reset_peak()
    else:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # resets VmHWM, the peak RSS, to the current RSS
    own(request)
    peak = tracemalloc.get_traced_memory()[1] if traced else _status("VmHWM")
    return {"inputs": inputs - before, "extra": max(peak - inputs, 0)}


def memory() -> None:
    print(
        "\nMemory of one assembly (a fresh process per figure): what the inputs (chunks and "
        "turns) take, and what assembling adds at its peak\n"
    )
    print("| workload | measured as | inputs | + assembly at peak | peak / inputs |")
    print("|---|---|---:|---:|---:|")
    shapes = [
        label(Workload("200 candidates", 200, True)),
        label(Workload("10000 candidates", 10_000, True)),
        *(
            label(Workload(f"{n:,} candidates, 1M window", n, True, window=True))
            for n in (1_000, 5_000)
        ),
        label(
            Workload(
                "1,000 candidates, 1M window, Zipfian prose", 1_000, True, window=True, zipf=True
            )
        ),
    ]
    for name in shapes:
        for how in ("traced", "rss"):
            if how == "rss" and name.startswith("200 "):
                continue  # the allocator reuses freed pages: RSS cannot see 2 MB of inputs
            probe = subprocess.run(
                [sys.executable, "-m", "benchmarks.compare", f"--probe-{how}", name],
                capture_output=True,
                text=True,
                check=True,
            )
            found = json.loads(probe.stdout)
            ratio = (found["inputs"] + found["extra"]) / found["inputs"]
            label_ = "Python allocations" if how == "traced" else "RSS"
            print(
                f"| {name} | {label_} | {found['inputs'] / 2**20:.1f} MB | "
                f"{found['extra'] / 2**20:.1f} MB | {ratio:.2f}x |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--only",
        choices=["peers", "scaling", "dedup", "repack", "memory", "window", "followup"],
    )
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--probe-traced", help=argparse.SUPPRESS)
    parser.add_argument("--probe-rss", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe_traced or args.probe_rss:
        traced = bool(args.probe_traced)
        print(json.dumps(memory_probe(args.probe_traced or args.probe_rss, traced)))
        return
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(
        f"ctxbudget speed, {date.today().isoformat()}, Python {sys.version.split()[0]}, "
        f"tiktoken {tiktoken.__version__ if hasattr(tiktoken, '__version__') else ''}, "
        f"{args.clock} time, medians of {args.repeat}"
    )
    if args.only in (None, "peers"):
        peers(args.repeat, clock)
    if args.only in (None, "scaling"):
        scaling(args.repeat, clock)
    if args.only in (None, "dedup"):
        dedup_cost(args.repeat, clock)
    if args.only in (None, "repack"):
        repack_cost(args.repeat, clock)
    if args.only in (None, "memory"):
        memory()
    if args.only in (None, "window"):
        window(args.repeat, clock)
    if args.only in (None, "followup"):
        followup(args.repeat, clock)


if __name__ == "__main__":
    main()
