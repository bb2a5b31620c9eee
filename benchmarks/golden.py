"""Fingerprints of what the benchmark workloads produce: the golden test's reference.

Speed work must not change a single output byte. For seed 0 of every workload this
records the sha256 of the assembled text, its exact total, and the sha256 of the
report and of the retrieval-only and history-only results; tests/core/test_golden.py
compares them with tests/core/golden_outputs.json. Regenerate that file only when an
output is meant to change, and say why in the commit:

    python -m benchmarks.golden --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from benchmarks.workloads import ENCODING, NOW, WORKLOADS, Workload, budget, prose
from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    CallableTokenizer,
    Chunk,
    ContextAssembler,
    Escalation,
    Principal,
    Report,
    SourceOptions,
    Tool,
    Turn,
)

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "core" / "golden_outputs.json"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def fingerprint(workload: Workload) -> dict[str, object]:
    """What seed 0 of `workload` produces, as short hashes and totals."""
    request = workload.request(0)
    assembler = ContextAssembler(tokenizer=ENCODING, budget=budget())
    result = request.assemble(assembler)
    return _fingerprint(assembler, result, request.chunks, request.history)


class _Sections:
    """A SectionLoader over the benchmark chunks: a document is its chunks in order."""

    def __init__(self, candidates: Sequence[Chunk]) -> None:
        self._by_document: dict[str, list[Chunk]] = {}
        for chunk in candidates:
            self._by_document.setdefault(chunk.document_id, []).append(chunk)

    def load_sections(self, document_id: str, principal: Principal | None) -> list[Chunk] | None:
        sections = self._by_document.get(document_id)
        return None if sections is None else sorted(sections, key=lambda c: c.ordinal or 0)


def _dated(candidates: list[Chunk]) -> list[Chunk]:
    """Every other chunk with an effective date, some chunks restricted to a tenant."""
    return [
        c.model_copy(
            update={
                "effective_date": date(2025, 1 + i % 12, 1) if i % 2 else None,
                "tenant": "acme" if i % 7 == 3 else None,
            }
        )
        for i, c in enumerate(candidates)
    ]


def option_fingerprints() -> dict[str, dict[str, object]]:
    """The 200-candidate workload under options the plain workloads leave at their defaults:
    XML sources, sandwich order, datamarking, conflict dates, a principal, escalation, and
    every claimant (tools as text and native, examples, memory)."""
    workload = WORKLOADS["200 candidates, ingest counts"]
    request = workload.request(0)
    wide = Budget(
        total=9_000,
        reserve_output=500,
        allocations=[
            Allocation("system", max=700, priority=0),
            Allocation("question", max=200, priority=0),
            Allocation("retrieved", min=1_200, max=3_000, priority=1),
            Allocation("examples", max=400, priority=1),
            Allocation("tools", max=600, priority=2),
            Allocation("history", max=1_500, priority=3),
            Allocation("memory", max=300, priority=4),
        ],
    )
    tools = [
        Tool(name=f"tool_{i}", description=prose_of(i, 40), score=(i * 37 % 11) / 10)
        for i in range(12)
    ]
    cases = {
        "xml, sandwich, datamark, conflicts, principal": (
            SourceOptions(
                source_format="xml",
                order="sandwich",
                datamark=True,
                conflict_policy="surface_both",
            ),
            budget(),
            {"principal": Principal(tenant="acme")},
            _dated(request.chunks),
        ),
        "escalation, chronological": (
            SourceOptions(
                loader=_Sections(request.chunks),
                escalation=Escalation(min_chunks=2, max_share=1.0),
                order="chronological",
            ),
            budget(),
            {},
            request.chunks,
        ),
        "every claimant, tools in text": (
            SourceOptions(),
            wide,
            {"tools": tools, "examples": prose_of(1, 300), "memory": prose_of(2, 200)},
            request.chunks,
        ),
        "every claimant, native tools": (
            SourceOptions(),
            wide,
            {"tools": tools, "examples": prose_of(1, 300), "memory": prose_of(2, 200)},
            request.chunks,
        ),
    }
    out = {}
    for name, (options, shape, extra, candidates) in cases.items():
        assembler = ContextAssembler(
            tokenizer=ENCODING, budget=shape, sources=options, native_tools="native" in name
        )
        result = request.with_chunks(candidates).assemble(assembler, **extra)
        out[f"options: {name}"] = _fingerprint(assembler, result, candidates, request.history)
    plain = WORKLOADS["200 candidates, no counts"].request(0)
    words = CallableTokenizer(lambda text: len(text.split()), name="words")
    for tokenizer in ("cl100k_base", words):
        assembler = ContextAssembler(tokenizer=tokenizer, budget=budget())
        result = plain.assemble(assembler)
        name = f"tokenizer: {assembler.counter.tokenizer.name}"
        out[name] = _fingerprint(assembler, result, plain.chunks, plain.history)
    return out


def prose_of(seed: int, tokens: int) -> str:
    """Seeded prose of about `tokens` tokens."""
    return prose(random.Random(seed), tokens)


# Report fields renamed after the digests were recorded (CHANGELOG "Deprecated"): the digest
# reads each under its recorded name, so a rename changes no digest and hides no new value.
_RECORDED_NAMES = {'"trimmed_by":': '"squeezed_by":'}


def _report_json(report: Report) -> str:
    """The report's JSON as the golden digests were recorded: renamed fields under old names."""
    text = report.model_dump_json()
    for new, recorded in _RECORDED_NAMES.items():
        text = text.replace(new, recorded, 1)
    return text


def _fingerprint(
    assembler: ContextAssembler,
    result: Assembled,
    candidates: list[Chunk],
    history: list[Turn],
) -> dict[str, object]:
    """Hashes and totals of an assembly, and of retrieval and history trimmed on their own."""
    selection = assembler.select_sources(candidates, now=NOW)
    trimmed = assembler.trim_history(history)
    return {
        "text": _digest(result.text),
        "total": result.report.total,
        "report": _digest(_report_json(result.report)),
        "messages": _digest(json.dumps(result.messages(style="anthropic"), sort_keys=True)),
        # The fence and its frame were added to Selection later; they repeat what `text` shows.
        "selection": _digest(selection.model_dump_json(exclude={"sources", "fence", "frame"})),
        "selection_tokens": selection.tokens,
        "history": _digest(trimmed.model_dump_json()),
        "history_tokens": trimmed.tokens,
        "escalated": result.report.escalated,
        "dropped": len(result.report.dropped),
    }


def fingerprints() -> dict[str, dict[str, object]]:
    """`fingerprint` of every workload, by label."""
    found = {name: fingerprint(workload) for name, workload in WORKLOADS.items()}
    return found | option_fingerprints()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {GOLDEN.name}")
    args = parser.parse_args()
    found = json.dumps(fingerprints(), indent=1, sort_keys=True) + "\n"
    if args.write:
        GOLDEN.write_text(found, encoding="utf-8")
        print(f"wrote {GOLDEN}")
    else:
        print(found, end="")


if __name__ == "__main__":
    main()
