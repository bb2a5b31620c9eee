"""The demo's sample handbook (core/ctxbudget/_demo.py): markdown by heading, ingest, BM25."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, date, datetime

import pytest

from ctxbudget import Principal, TiktokenTokenizer
from ctxbudget._demo import (
    PRESETS,
    TENANT,
    Document,
    Handbook,
    Section,
    corpus,
    handbook,
    split_markdown,
)


@pytest.fixture(scope="module")
def book(o200k: TiktokenTokenizer) -> Handbook:
    return handbook(o200k)


# --- split_markdown -----------------------------------------------------------------------


def test_split_markdown_reads_toml_front_matter() -> None:
    meta, _ = split_markdown('+++\nupdated_at = 2026-01-02T03:04:05Z\ngroups = ["hr"]\n+++\n# T\n')

    assert meta == {"updated_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "groups": ["hr"]}


def test_split_markdown_with_unclosed_front_matter_says_so() -> None:
    with pytest.raises(ValueError, match=r"^front matter opened with \+\+\+ on line 1 is never"):
        split_markdown("+++\ntitle = 'x'\n# T\n")


def test_split_markdown_cuts_at_every_heading_with_its_path() -> None:
    _, sections = split_markdown("# Title\nintro\n## A\na text\n### A.1\ndeep\n## B\nb text\n")

    assert sections == [
        Section(("Title",), "# Title", "intro"),
        Section(("Title", "A"), "## A", "a text"),
        Section(("Title", "A", "A.1"), "### A.1", "deep"),
        Section(("Title", "B"), "## B", "b text"),
    ]


def test_split_markdown_ignores_hashes_inside_code_blocks() -> None:
    _, sections = split_markdown("# T\n```\n# not a heading\n```\nafter\n")

    assert [s.path for s in sections] == [("T",)]
    assert sections[0].body == "```\n# not a heading\n```\nafter"


def test_split_markdown_reads_setext_headings() -> None:
    _, sections = split_markdown("Title\n=====\nbody\n")

    assert sections == [Section(("Title",), "Title\n=====", "body")]


def test_split_markdown_keeps_text_before_the_first_heading() -> None:
    _, sections = split_markdown("preface\n\n# T\nbody\n")

    assert sections[0] == Section((), "", "preface")


def test_split_markdown_without_headings_is_one_section() -> None:
    assert split_markdown("just text\n")[1] == [Section((), "", "just text")]


# --- the sample corpus --------------------------------------------------------------------


def test_corpus_has_ten_to_fifteen_documents() -> None:
    assert 10 <= len(corpus()) <= 15


def test_corpus_documents_each_open_with_their_title() -> None:
    assert all(document.sections[0].heading.startswith("# ") for document in corpus())


def test_corpus_has_the_documents_each_rule_needs() -> None:
    meta = {document.id: document.meta for document in corpus()}

    assert meta["pto-policy-2026"]["effective_date"] == date(2026, 1, 1)
    assert meta["hr-faq"]["effective_date"] == date(2024, 2, 1)
    assert meta["alpine-shell-jacket"]["parse_warnings"] == ["OCR confidence 0.71 on page 2"]
    assert meta["board-minutes-2026-04"]["groups"] == ["board"]


# --- ingest -------------------------------------------------------------------------------


def test_handbook_chunk_ids_are_unique(book: Handbook) -> None:
    assert max(Counter(chunk.id for chunk in book.chunks).values()) == 1


def test_handbook_counts_tokens_at_ingest(book: Handbook, o200k: TiktokenTokenizer) -> None:
    assert all(chunk.tokens == o200k.count(chunk.content) for chunk in book.chunks)


def test_handbook_chunks_carry_heading_path_from_the_title(book: Handbook) -> None:
    clause = next(c for c in book.chunks if c.id.endswith("#7-3-exceptions-to-clause-7-2"))

    assert clause.heading_path == (
        "Supply agreement: Bergwerk Textiles GmbH",
        "7. Delivery",
        "7.3 Exceptions to clause 7.2",
    )
    assert clause.title == "Supply agreement: Bergwerk Textiles GmbH"
    assert clause.content.startswith("Clause 7.2 does not apply")


def test_handbook_ordinals_follow_reading_order(book: Handbook) -> None:
    ordinals: dict[str, list[int]] = {}
    for chunk in book.chunks:
        assert chunk.ordinal is not None
        ordinals.setdefault(chunk.document_id, []).append(chunk.ordinal)

    assert all(found == sorted(set(found)) for found in ordinals.values())


def test_handbook_skips_headings_without_text(book: Handbook) -> None:
    assert not any(chunk.id.endswith("#7-delivery") for chunk in book.chunks)


def test_handbook_puts_every_chunk_in_the_tenant_and_restricts_the_minutes(book: Handbook) -> None:
    assert {chunk.tenant for chunk in book.chunks} == {TENANT}
    assert {c.document_id for c in book.chunks if c.groups is not None} == {"board-minutes-2026-04"}


def test_handbook_flags_the_migration_notice_at_ingest(book: Handbook) -> None:
    flagged = {chunk.id: chunk.parse_warnings for chunk in book.chunks if chunk.parse_warnings}

    assert flagged["hr-portal-migration#note-for-assistants"] == (
        "asks to ignore earlier instructions",
        "addresses instructions to an AI",
    )
    assert {c.split("#")[0] for c in flagged} == {"hr-portal-migration", "alpine-shell-jacket"}


def test_handbook_numbers_chunks_whose_headings_repeat(o200k: TiktokenTokenizer) -> None:
    document = Document.parse("faq", "# FAQ\nintro\n## Why?\none\n## Why?\ntwo\n## ???\nthree\n")

    ids = [chunk.id for chunk in Handbook(o200k, [document]).chunks]

    assert ids == ["faq#top", "faq#why", "faq#why-2", "faq#top-3"]


def test_handbook_titles_a_document_without_headings_by_its_id(o200k: TiktokenTokenizer) -> None:
    (chunk,) = Handbook(o200k, [Document.parse("note", "Only text.\n")]).chunks

    assert (chunk.title, chunk.heading_path, chunk.id) == ("note", (), "note#top")


# --- the section loader -------------------------------------------------------------------


def test_load_sections_returns_the_document_in_reading_order_with_headings(
    book: Handbook,
) -> None:
    sections = book.load_sections("supply-agreement-bergwerk", Principal(tenant=TENANT))

    assert sections is not None
    assert [s.ordinal for s in sections] == list(range(len(sections)))
    assert sections[0].content.startswith("Between Acme Outfitters GmbH")
    assert "## 7. Delivery" in [s.content for s in sections]
    assert "### 7.2 Late-delivery credit\n\nFor each full week" in sections[5].content


def test_load_sections_keeps_the_acl_and_the_ingest_warnings(book: Handbook) -> None:
    minutes = book.load_sections("board-minutes-2026-04", None)
    notice = book.load_sections("hr-portal-migration", None)

    assert minutes is not None
    assert notice is not None
    assert {s.groups for s in minutes} == {frozenset({"board"})}
    assert notice[-1].parse_warnings == (
        "asks to ignore earlier instructions",
        "addresses instructions to an AI",
    )


def test_load_sections_of_unknown_document_is_none(book: Handbook) -> None:
    assert book.load_sections("nope", None) is None


# --- retrieval ----------------------------------------------------------------------------


def test_retrieve_scores_relative_to_the_best_match(book: Handbook) -> None:
    hits = book.retrieve("late delivery credit", k=5)

    assert len(hits) == 5
    assert hits[0].score == 1.0
    assert all(0 < (h.score or 0) <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0 for h in hits), reverse=True)
    assert hits[0].id == "supply-agreement-bergwerk#7-2-late-delivery-credit"


def test_retrieve_ignores_permissions(book: Handbook) -> None:
    hits = book.retrieve("Leipzig warehouse close", k=3)

    assert hits[0].document_id == "board-minutes-2026-04"


def test_retrieve_with_only_stopwords_finds_nothing(book: Handbook) -> None:
    assert book.retrieve("is it the", k=5) == []


def test_retrieve_with_unknown_words_finds_nothing(book: Handbook) -> None:
    assert book.retrieve("zebra xylophone", k=5) == []


def test_retrieve_never_asks_for_more_than_the_corpus(o200k: TiktokenTokenizer) -> None:
    small = Handbook(o200k, [Document.parse("a", "# A\napples\n## B\nbananas and apples\n")])

    assert [hit.id for hit in small.retrieve("apples", k=10)] == ["a#top", "a#b"]


def test_presets_have_unique_names_and_questions() -> None:
    assert len({p.name for p in PRESETS}) == len(PRESETS)
    assert all(p.question.endswith("?") for p in PRESETS)
