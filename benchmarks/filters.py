"""Sources kept at top_k=30 when 60% of the corpus is forbidden, with and without the
permission filter before retrieval, in LangChain's InMemoryVectorStore and LlamaIndex's
VectorStoreIndex (docs/permissions.md, "Permission filters before retrieval").

    python -m benchmarks.filters            # 1,000 chunks, 20 questions; --chunks N --questions N

Each question retrieves 30 candidates, and ctxbudget's component (ContextBudgetRetriever,
ContextBudgetPostprocessor) selects from them for one principal under a limit that holds
all 30, so what it keeps is bounded by retrieval only. Without the filter the permit drops
the forbidden candidates after retrieval; with it the store never returns them. Offline:
deterministic fake embeddings (LangChain's DeterministicFakeEmbedding, the same vectors
given to LlamaIndex), o200k counts.
"""

from __future__ import annotations

import argparse
import random
import statistics
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import QueryBundle, TextNode

from ctxbudget import Budget, ContextAssembler, Principal
from langchain_ctxbudget import ContextBudgetRetriever
from langchain_ctxbudget.filters import in_memory_filter
from llamaindex_ctxbudget import (
    AccessMarker,
    ContextBudgetPostprocessor,
    PrincipalRetriever,
    as_principal,
)

TOP_K = 30
LIMIT = 30_000
"""Tokens for the sources: room for all 30 candidates, so the budget never decides."""
PRINCIPAL = Principal(tenant="acme", groups=frozenset({"sales"}))
FORBIDDEN: list[dict[str, Any]] = [
    {"tenant": "globex"},
    {"groups": ["hr"]},
    {"tenant": "acme", "groups": ["legal"]},
]
ALLOWED: list[dict[str, Any]] = [{}, {"tenant": "acme"}, {"tenant": "acme", "groups": ["sales"]}]
WORDS = [
    "refund",
    "invoice",
    "shipping",
    "warranty",
    "contract",
    "salary",
    "audit",
    "policy",
    "travel",
    "device",
]


class _SameVectors(BaseEmbedding):
    """LlamaIndex embeddings that are LangChain's DeterministicFakeEmbedding vectors."""

    size: int = 64

    def _vector(self, text: str) -> list[float]:
        return DeterministicFakeEmbedding(size=self.size).embed_query(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


def corpus(size: int, seed: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, text, ACL metadata) for `size` chunks, 60% forbidden to PRINCIPAL, shuffled."""
    rng = random.Random(seed)
    rows = []
    for i in range(size):
        acl = rng.choice(FORBIDDEN) if i % 5 < 3 else rng.choice(ALLOWED)
        text = f"Chunk {i}: " + " ".join(rng.choices(WORDS, k=40)) + "."
        rows.append((f"c{i}", text, dict(acl)))
    rng.shuffle(rows)
    return rows


def langchain_kept(
    rows: list[tuple[str, str, dict[str, Any]]], questions: list[str]
) -> dict[str, list[int]]:
    documents = [Document(text, id=id_, metadata=meta) for id_, text, meta in rows]
    store = InMemoryVectorStore.from_documents(documents, DeterministicFakeEmbedding(size=64))
    assembler = ContextAssembler(tokenizer="o200k_base")
    kept: dict[str, list[int]] = {}
    for label, search in (
        ("without", {"k": TOP_K}),
        ("with", {"k": TOP_K, "filter": in_memory_filter(PRINCIPAL)}),
    ):
        retriever = ContextBudgetRetriever(
            retriever=store.as_retriever(search_kwargs=search),
            assembler=assembler,
            principal=PRINCIPAL,
            max_tokens=LIMIT,
        )
        kept[label] = [len(retriever.invoke(q)) for q in questions]
    return kept


def llamaindex_kept(
    rows: list[tuple[str, str, dict[str, Any]]], questions: list[str]
) -> dict[str, list[int]]:
    nodes = [TextNode(id_=id_, text=text, metadata=meta) for id_, text, meta in rows]
    index = VectorStoreIndex(list(AccessMarker()(nodes)), embed_model=_SameVectors())
    budget = ContextBudgetPostprocessor(
        tokenizer="o200k_base",
        budget=Budget.for_context_window(128_000, reserve_output=1_000),
        max_tokens=LIMIT,
    )
    kept: dict[str, list[int]] = {"without": [], "with": []}
    plain = index.as_retriever(similarity_top_k=TOP_K)
    filtered = PrincipalRetriever(index, similarity_top_k=TOP_K)
    with as_principal(PRINCIPAL):
        for question in questions:
            for label, retriever in (("without", plain), ("with", filtered)):
                found = retriever.retrieve(question)
                selected = budget.postprocess_nodes(found, QueryBundle(question))
                kept[label].append(len(selected))
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=1_000)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = corpus(args.chunks, args.seed)
    rng = random.Random(args.seed + 1)
    questions = [" ".join(rng.choices(WORDS, k=6)) for _ in range(args.questions)]
    forbidden = sum(1 for _, _, meta in rows if meta in FORBIDDEN)
    print(
        f"{args.chunks} chunks, {forbidden / args.chunks:.0%} forbidden to the principal; "
        f"top_k={TOP_K}; {args.questions} questions; sources kept per question"
    )
    print(f"{'store':<34} {'filter':<8} {'median':>6} {'min':>4} {'max':>4}")
    for store, kept in (
        ("LangChain InMemoryVectorStore", langchain_kept(rows, questions)),
        ("LlamaIndex VectorStoreIndex", llamaindex_kept(rows, questions)),
    ):
        for label in ("without", "with"):
            counts = kept[label]
            print(
                f"{store:<34} {label:<8} {statistics.median(counts):>6g} "
                f"{min(counts):>4} {max(counts):>4}"
            )


if __name__ == "__main__":
    main()
