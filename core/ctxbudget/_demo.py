"""The sample corpus behind `ctxbudget demo`: a small company handbook, chunked and retrieved.

Thirteen markdown documents (package data in ``_corpus/``), written so that each rule
of the manual has something to act on (docs/cli.md, "What the demo shows"): a 2026
leave policy and a stale FAQ that disagree, a page mirrored with a boilerplate header, an
OCR-scanned product sheet, a contract whose clause 7.3 qualifies 7.2, a notice that gives
the model orders, and board minutes only the board may see. Chunked by heading at ingest
(with heading paths, ordinals and token counts), then retrieved with BM25 (`bm25s`), which
knows nothing of permissions, as most retrievers do: the assembler has to.

The retriever and the markdown parser come from the ``cli`` extra (bm25s,
snowballstemmer, markdown-it-py) and are imported when the handbook is built, so the
presets can be listed without them.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any, Final

from ctxbudget import Chunk, Principal, Tokenizer, Tool, Turn, flag_instructions

__all__ = [
    "EXAMPLES",
    "HISTORY",
    "NOW",
    "PRESETS",
    "SYSTEM",
    "TENANT",
    "TOOLS",
    "Document",
    "Handbook",
    "Preset",
    "Section",
    "corpus",
    "handbook",
    "split_markdown",
]

NOW: Final = datetime(2026, 6, 1, tzinfo=UTC)
"""The demo's clock, pinned so its output (freshness notes included) never changes."""

TENANT: Final = "acme"
"""Every document belongs to this tenant; the board minutes also need the ``board`` group."""

SYSTEM: Final = (
    "You are the internal help desk assistant of Acme Outfitters. Answer staff questions "
    "from the sources only and cite each claim with its source number, like [2]. If the "
    "sources do not answer the question, say so."
)

EXAMPLES: Final = "Q: Do we ship to Switzerland?\nA: No, Acme ships only within the EU [1]."

HISTORY: Final = (
    Turn(role="user", content="Hi! I started in customer support this week."),
    Turn(
        role="assistant",
        content="Welcome to Acme! Ask me about policies, products or processes; I answer "
        "from the handbook and cite it.",
    ),
)

TOOLS: Final = (
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
        name="open_ticket",
        description="Open a ticket for the HR, IT or facilities team.",
        parameters={
            "type": "object",
            "properties": {
                "team": {"type": "string", "enum": ["hr", "it", "facilities"]},
                "summary": {"type": "string"},
            },
            "required": ["team", "summary"],
        },
    ),
)


@dataclass(frozen=True)
class Preset:
    """A question chosen to show one rule at work, and what to look for in the output."""

    name: str
    question: str
    shows: str
    window: int | None = None
    """A context window to budget for (`Budget.for_context_window`); None: `Budget.default()`."""


PRESETS: Final = (
    Preset(
        "conflict",
        "How many days of paid time off do I get per year?",
        "the 2026 policy (24 days) and the 2024 FAQ (20 days) disagree: both show their "
        "effective dates and the fence notice says to follow the newer one",
    ),
    Preset(
        "returns",
        "A customer's Alpine Shell Jacket arrived with a damaged seam five weeks ago. "
        "Can they still return it?",
        "five sections of the returns policy were retrieved, so the policy is sent whole; "
        "the scanned product sheet keeps its OCR warning and gets a freshness note",
    ),
    Preset(
        "injection",
        "Should I email my password to the migration desk for the new HR portal?",
        "the notice that orders the model to collect passwords is flagged at ingest (see its "
        "header) and its fake fence end and forged [1] header are neutralised; the wiki's copy "
        "of the password rules is dropped as a duplicate",
    ),
    Preset(
        "escalation",
        "How much credit do we get when Bergwerk delivers late?",
        "several clauses of the supply agreement were retrieved, so the whole agreement is "
        "sent in their place: clause 7.3 limits the credit of clause 7.2",
    ),
    Preset(
        "permissions",
        "Is the Leipzig warehouse going to close?",
        "the board minutes match best but are dropped as forbidden for staff, before "
        "anything reads them; try --as board",
    ),
    Preset(
        "budget",
        "A customer's Alpine Shell Jacket arrived with a damaged seam five weeks ago. "
        "Can they still return it?",
        "the returns question in a 1,500-token window: every allocation is scaled down, and "
        "the chunks that do not fit in retrieval's share are dropped whole, lowest rank first",
        window=1_500,
    ),
)
"""The first preset is the default question of `ctxbudget demo`."""


# --- markdown by heading ------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """The text under one heading, up to the next heading of any level."""

    path: tuple[str, ...]
    """Headings from the document's title down to this one."""
    heading: str
    """The heading line as written (``## 7. Delivery``); empty for text before any heading."""
    body: str


_FRONT_MATTER: Final = "+++"


def split_markdown(text: str) -> tuple[dict[str, Any], list[Section]]:
    """A markdown document's TOML front matter (between ``+++`` lines) and its sections.

    Headings are found by a CommonMark parser, so a ``#`` line inside a code block is
    not one; the text between headings is kept exactly as written.
    """
    from markdown_it import MarkdownIt

    meta: dict[str, Any] = {}
    lines = text.splitlines()
    if lines and lines[0].strip() == _FRONT_MATTER:
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == _FRONT_MATTER), 0)
        if not end:
            raise ValueError("front matter opened with +++ on line 1 is never closed with +++")
        meta = tomllib.loads("\n".join(lines[1:end]))
        lines = lines[end + 1 :]
    headings = [
        (token.map[0], token.map[1], int(token.tag[1:]), tokens[i + 1].content)
        for tokens in [MarkdownIt("commonmark").parse("\n".join(lines))]
        for i, token in enumerate(tokens)
        if token.type == "heading_open" and token.map is not None
    ]
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    first = headings[0][0] if headings else len(lines)
    starts = [(0, 0, 0, "")] if any(line.strip() for line in lines[:first]) else []
    bounds = [*starts, *headings]
    for index, (start, body_start, level, title) in enumerate(bounds):
        if level:
            stack = [*[(lv, t) for lv, t in stack if lv < level], (level, title)]
        stop = bounds[index + 1][0] if index + 1 < len(bounds) else len(lines)
        sections.append(
            Section(
                path=tuple(t for _, t in stack),
                heading="\n".join(lines[start:body_start]).strip() if level else "",
                body="\n".join(lines[body_start:stop]).strip(),
            )
        )
    return meta, sections


def _slug(heading: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", heading.lower()).strip("-") or "top"


# --- the handbook -------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One markdown document: its id, its front matter and its sections."""

    id: str
    meta: dict[str, Any]
    sections: tuple[Section, ...]

    @classmethod
    def parse(cls, document_id: str, text: str) -> Document:
        meta, sections = split_markdown(text)
        return cls(document_id, meta, tuple(sections))


@functools.cache
def corpus() -> tuple[Document, ...]:
    """The sample handbook: every ``_corpus/*.md`` of the package, by file name."""
    folder = resources.files("ctxbudget").joinpath("_corpus")
    return tuple(
        Document.parse(entry.name.removesuffix(".md"), entry.read_text(encoding="utf-8"))
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".md")
    )


def _fields(document: Document) -> dict[str, Any]:
    """Chunk fields every section of `document` shares: title, dates, source, ACL."""
    meta = document.meta
    groups = meta.get("groups")
    return {
        "document_id": document.id,
        "title": next((s.path[0] for s in document.sections if s.path), document.id),
        "effective_date": meta.get("effective_date"),
        "updated_at": meta.get("updated_at"),
        "source": meta.get("source"),
        "parse_warnings": tuple(meta.get("parse_warnings", ())),
        "tenant": TENANT,
        "groups": None if groups is None else frozenset(groups),
    }


class Handbook:
    """The corpus at ingest: chunks with token counts, a BM25 index, and a `SectionLoader`.

    A chunk is the text under one heading; headings without text of their own (``## 7.
    Delivery`` right before ``### 7.1``) give none. Each chunk's `tokens` is counted here
    with the model's tokenizer, as an ingest pipeline would, and `flag_instructions`
    adds a parse warning to text that looks like orders to a model.
    """

    def __init__(self, tokenizer: Tokenizer, documents: Sequence[Document]) -> None:
        import bm25s  # type: ignore[import-untyped]
        import snowballstemmer  # type: ignore[import-untyped]

        self.chunks: tuple[Chunk, ...] = tuple(self._ingest(tokenizer, documents))
        self._sections = {d.id: self._whole(d) for d in documents}
        stemmer = snowballstemmer.stemmer("english")
        self._tokenize = functools.partial(
            bm25s.tokenize, stopwords="en", stemmer=stemmer, show_progress=False
        )
        self._index = bm25s.BM25()
        self._index.index(
            self._tokenize([_searchable(c) for c in self.chunks]), show_progress=False
        )

    @staticmethod
    def _ingest(tokenizer: Tokenizer, documents: Sequence[Document]) -> Iterator[Chunk]:
        for document in documents:
            fields = _fields(document)
            seen: set[str] = set()
            for ordinal, section in enumerate(document.sections):
                if not section.body:
                    continue
                slug = _slug(section.path[-1]) if len(section.path) > 1 else "top"
                chunk_id = f"{document.id}#{slug}"
                if chunk_id in seen:
                    chunk_id = f"{chunk_id}-{ordinal}"
                seen.add(chunk_id)
                yield flag_instructions(
                    Chunk(
                        id=chunk_id,
                        content=section.body,
                        heading_path=section.path,
                        ordinal=ordinal,
                        tokens=tokenizer.count(section.body),
                        **fields,
                    )
                )

    def retrieve(self, question: str, *, k: int) -> list[Chunk]:
        """The `k` best chunks for `question` by BM25, best first, permissions ignored.

        `score` is BM25 relative to the best match (1.0 for it), so a relevance floor
        reads as "at least this share of the best match's score".
        """
        (terms,) = self._tokenize([question], return_ids=False)
        if not terms:
            return []
        ids, scores = self._index.retrieve([terms], k=min(k, len(self.chunks)), show_progress=False)
        hits = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if s > 0]
        if not hits:
            return []
        best = hits[0][1]
        return [self.chunks[i].model_copy(update={"score": round(s / best, 3)}) for i, s in hits]

    def load_sections(self, document_id: str, principal: Principal | None) -> list[Chunk] | None:
        """Every section of a document in reading order, each with its heading and its ACL.

        The assembler sends the document whole only if `principal` may see every
        section, so all are returned whoever asks.
        """
        sections = self._sections.get(document_id)
        return None if sections is None else list(sections)

    @staticmethod
    def _whole(document: Document) -> tuple[Chunk, ...]:
        """The sections a document is read whole from, scanned at ingest like its chunks.

        A section keeps its heading line, because a document read whole needs them (a
        chunk's header already shows its path); the title's own line is the header's.
        """
        fields = _fields(document)
        return tuple(
            flag_instructions(
                Chunk(
                    id=f"{document.id}@{ordinal}",
                    content="\n\n".join(p for p in (section.heading, section.body) if p)
                    if len(section.path) > 1
                    else section.body,
                    heading_path=section.path,
                    ordinal=ordinal,
                    **fields,
                )
            )
            for ordinal, section in enumerate(document.sections)
        )


def _searchable(chunk: Chunk) -> str:
    """What the retriever indexes: the title and headings too, as search engines do."""
    return "\n".join([chunk.title or "", *chunk.heading_path[1:], chunk.content])


@functools.cache
def handbook(tokenizer: Tokenizer) -> Handbook:
    """The sample handbook ingested with `tokenizer`, built once per tokenizer."""
    return Handbook(tokenizer, corpus())
