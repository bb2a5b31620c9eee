"""A small built-in example for `python -m ctxbudget`: a support question over a few sources."""

from __future__ import annotations

from datetime import UTC, date, datetime

from ctxbudget._inputs import Chunk, Tool, Turn

NOW = datetime(2026, 6, 1, tzinfo=UTC)
"""The demo's clock, pinned so its output (freshness notes included) never changes."""

SYSTEM = (
    "You are the support assistant for Acme Outfitters. Answer from the sources only and "
    "cite each claim with its source number, like [2]. If the sources do not answer the "
    "question, say so."
)

EXAMPLES = (
    "Q: Can I return worn boots?\n"
    "A: Only if they are defective; worn items are otherwise final sale [1]."
)

QUESTION = "Can I return a jacket I bought in Berlin after five weeks?"

CHUNKS = (
    Chunk(
        id="returns-eu-2",
        document_id="returns-policy",
        title="Returns policy",
        heading_path=("Returns", "EU customers"),
        ordinal=2,
        content=(
            "Customers in the EU may return unworn items within 60 days of delivery for a full "
            "refund. Refunds are issued to the original payment method within 14 days."
        ),
        rerank_score=0.91,
        score=0.82,
        effective_date=date(2025, 3, 1),
        updated_at=datetime(2026, 3, 1, tzinfo=UTC),
        source="confluence",
    ),
    Chunk(
        id="returns-global-1",
        document_id="returns-policy",
        title="Returns policy",
        heading_path=("Returns",),
        ordinal=1,
        content=(
            "Unworn items may be returned within 30 days of delivery. Final-sale items cannot "
            "be returned."
        ),
        rerank_score=0.74,
        score=0.80,
        source="confluence",
    ),
    Chunk(
        id="sku-4411",
        document_id="sku-4411-spec",
        title="Alpine Shell Jacket (SKU 4411)",
        content=(
            "Waterproof 3-layer shell. Sizes XS-XXL. Care: machine wash cold, hang dry. "
            "Eligible for standard returns."
        ),
        rerank_score=0.55,
        score=0.77,
        parse_warnings=("OCR confidence 0.71 on page 2",),
        updated_at=datetime(2023, 9, 14, tzinfo=UTC),
        source="pim",
    ),
    Chunk(
        id="shipping-3",
        document_id="shipping-faq",
        title="Shipping FAQ",
        content="Orders ship within two business days from our Leipzig warehouse.",
        rerank_score=0.12,
        score=0.60,
        source="zendesk",
    ),
)

HISTORY = (
    Turn(role="user", content="Hi, I have a question about a return."),
    Turn(role="assistant", content="Of course. Which item, and where did you buy it?"),
    Turn(role="user", content="The Alpine Shell Jacket, from your Berlin store."),
)

TOOLS = (
    Tool(
        name="lookup_order",
        description="Find an order by its number and return its items and delivery date.",
        parameters={
            "type": "object",
            "properties": {"order_number": {"type": "string"}},
            "required": ["order_number"],
        },
    ),
    Tool(
        name="open_return",
        description="Start a return for one item of an order.",
        parameters={
            "type": "object",
            "properties": {"order_number": {"type": "string"}, "sku": {"type": "string"}},
            "required": ["order_number", "sku"],
        },
    ),
)
