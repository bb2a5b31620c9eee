"""`ctxbudget inspect` (core/ctxbudget/_cli/inspect_chunks.py, _cli/jsonl.py): your own chunks."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from ctxbudget import Chunk, Turn
from tests.support.cli import Run

CHUNKS = [
    Chunk(
        id="refunds-1",
        document_id="refunds",
        title="Refunds",
        heading_path=("Refunds", "Payment"),
        ordinal=2,
        content="Refunds are paid within 5 business days.\u2028Line two of the same paragraph.",
        score=0.9,
        rerank_score=0.8,
        effective_date=date(2025, 3, 1),
        updated_at=datetime(2026, 3, 1, 12, 30, tzinfo=UTC),
        source="wiki",
        parse_warnings=("OCR confidence 0.9",),
        tenant="acme",
        groups=frozenset({"support", "sales"}),
        tokens=12,
        embedding=(0.25, -1.0, 0.5),
        metadata={"url": "https://example.invalid/refunds", "n": [1, 2]},
    ),
    Chunk(id="returns-1", content="Unworn items may be returned within 30 days.", tenant="acme"),
    Chunk(id="minutes", content="Confidential board minutes.", groups=frozenset({"board"})),
]


def write_jsonl(tmp_path: Path, lines: list[str], name: str = "chunks.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def chunks_file(tmp_path: Path) -> str:
    return write_jsonl(tmp_path, [chunk.model_dump_json() for chunk in CHUNKS])


def test_inspect_json_round_trips_chunks_written_by_model_dump_json(
    cli: Run, chunks_file: str
) -> None:
    data = cli(
        "inspect", chunks_file, "-q", "Refunds?", "--tenant", "acme", "--as", "support", "--json"
    ).json()

    kept = {source["id"]: Chunk.model_validate(source["chunk"]) for source in data["sources"]}
    assert kept == {c.id: c for c in CHUNKS[:2]}
    assert {item["id"]: item["reason"] for item in data["report"]["dropped"]} == {
        "minutes": "forbidden"
    }
    assert data["principal"] == {"tenant": "acme", "groups": ["support"]}


def test_inspect_without_principal_shows_only_unrestricted_chunks(
    cli: Run, chunks_file: str
) -> None:
    data = cli("inspect", chunks_file, "--question", "Refunds?", "--json").json()

    assert data["sources"] == []
    assert data["principal"] is None
    assert [item["reason"] for item in data["report"]["dropped"]] == ["forbidden"] * 3


def test_inspect_with_history_sends_the_turns(cli: Run, chunks_file: str, tmp_path: Path) -> None:
    turns = [
        Turn(role="user", content="Hi, about my refund."),
        Turn(role="assistant", content="Sure."),
    ]
    history = write_jsonl(tmp_path, [t.model_dump_json() for t in turns], "history.jsonl")

    data = cli("inspect", chunks_file, "-q", "When?", "--history", history, "--json").json()

    assert "User: Hi, about my refund.\n\nAssistant: Sure." in data["prompt"]
    assert data["report"]["sizes"]["history"] > 0


def test_inspect_view_lists_sources_and_drops(
    cli: Run, chunks_file: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relative path, so the title is not cut to the terminal's width wherever tmp_path is.
    monkeypatch.chdir(Path(chunks_file).parent)
    name = Path(chunks_file).name
    ran = cli("inspect", name, "-q", "Refunds?", "--tenant", "acme", "--as", "support")

    assert ran.code == 0
    assert f"ctxbudget inspect {name}" in ran.out
    assert "\n[1] Refunds — Payment ⚠ OCR confidence 0.9\n" in ran.out
    assert "3 chunks, 0 history turns" in ran.out
    assert "minutes" in ran.out.split("Dropped: 1", 1)[1]


def test_inspect_skips_blank_lines(cli: Run, tmp_path: Path) -> None:
    chunk = Chunk(id="public", content="Open to everyone.")
    path = write_jsonl(tmp_path, ["", chunk.model_dump_json(), "   ", ""])

    assert len(cli("inspect", path, "-q", "Returns?", "--json").json()["sources"]) == 1


def test_inspect_malformed_json_names_the_line(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [CHUNKS[1].model_dump_json(), '{"id": "x", "content": '])

    ran = cli("inspect", path, "-q", "Q?")

    assert (ran.code, ran.out) == (1, "")
    assert ran.err.startswith(f"ctxbudget: {path}, line 2: not valid JSON (")
    assert ran.err.count("\n") == 1


def test_inspect_wrong_field_type_names_line_and_field(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, ['{"id": "x", "content": "text", "ordinal": "first"}'])

    ran = cli("inspect", path, "-q", "Q?")

    assert ran.code == 1
    assert ran.err == (
        f"ctxbudget: {path}, line 1: ordinal: Input should be a valid integer, unable to parse "
        "string as an integer\n"
    )


def test_inspect_missing_field_names_it(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, ['{"id": "x"}'])

    assert cli("inspect", path, "-q", "Q?").err == (
        f"ctxbudget: {path}, line 1: content: Field required\n"
    )


def test_inspect_unknown_field_suggests_the_acl_field(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, ['{"id": "x", "content": "t", "tennant": "acme"}'])

    assert cli("inspect", path, "-q", "Q?").err == (
        f"ctxbudget: {path}, line 1: unknown Chunk field 'tennant'; did you mean 'tenant'? "
        "Extra data goes in metadata={...}.\n"
    )


def test_inspect_several_problems_says_how_many_more(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, ['{"ordinal": -1, "score": "high"}'])

    err = cli("inspect", path, "-q", "Q?").err

    assert err.startswith(f"ctxbudget: {path}, line 1: id: Field required (and 3 more)")


def test_inspect_line_that_is_not_an_object_says_so(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, ['["x"]'])

    assert cli("inspect", path, "-q", "Q?").err == (
        f"ctxbudget: {path}, line 1: expected a JSON object of Chunk fields\n"
    )


def test_inspect_history_error_names_its_file(cli: Run, chunks_file: str, tmp_path: Path) -> None:
    history = write_jsonl(tmp_path, ['{"role": "robot", "content": "hi"}'], "history.jsonl")

    err = cli("inspect", chunks_file, "-q", "Q?", "--history", history).err

    assert err.startswith(f"ctxbudget: {history}, line 1: role: Input should be 'system', ")


def test_inspect_empty_file_is_an_error(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [""])

    assert cli("inspect", path, "-q", "Q?").err == (
        f"ctxbudget: {path} holds no Chunk; write one per line, as Chunk.model_dump_json() does\n"
    )


def test_inspect_duplicate_ids_is_a_failure(cli: Run, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path, [CHUNKS[1].model_dump_json()] * 2)

    ran = cli("inspect", path, "-q", "Q?")

    assert ran.code == 1
    assert ran.err.startswith("ctxbudget: chunk id 'returns-1' is given twice")


def test_inspect_missing_file_exits_1(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "nope.jsonl"

    ran = cli("inspect", str(path), "-q", "Q?")

    assert (ran.code, ran.err) == (1, f"ctxbudget: file {path} does not exist\n")


def test_inspect_directory_is_a_failure(cli: Run, tmp_path: Path) -> None:
    assert cli("inspect", str(tmp_path), "-q", "Q?").err == (
        f"ctxbudget: file {tmp_path} is a directory; give a file\n"
    )


def test_inspect_file_not_utf8_says_which_byte(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"id": "x", "content": "caf\xe9"}\n')

    assert cli("inspect", str(path), "-q", "Q?").err == (
        f"ctxbudget: file {path} is not UTF-8 text (byte 27 cannot be decoded); convert it to "
        "UTF-8\n"
    )


def test_inspect_without_question_is_a_usage_error(cli: Run, chunks_file: str) -> None:
    ran = cli("inspect", chunks_file)

    assert ran.code == 2
    assert ran.err == (
        "ctxbudget: the following arguments are required: --question/-q; "
        "see 'ctxbudget inspect --help'\n"
    )


def test_inspect_blank_question_is_a_failure(cli: Run, chunks_file: str) -> None:
    assert cli("inspect", chunks_file, "-q", " ").err == (
        "ctxbudget: --question is empty; pass the question the chunks were retrieved for\n"
    )


def test_inspect_floor_that_cannot_be_met_names_the_claimant(
    cli: Run, chunks_file: str, tmp_path: Path
) -> None:
    budget = tmp_path / "budget.toml"
    budget.write_text(
        "total = 300\n[allocations.retrieved]\nmin = 0\npriority = 1\n"
        "[allocations.question]\nmin = 0\nmax = 1\npriority = 0\n",
        encoding="utf-8",
    )

    ran = cli(
        "inspect", chunks_file, "-q", "A question longer than one token?", "--budget", str(budget)
    )

    assert ran.code == 1
    assert ran.err.startswith("ctxbudget: 'question' needs ")
