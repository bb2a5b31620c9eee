"""Cases: the model, mappings, and JSONL files whose errors name the line and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import Chunk
from ctxbudget.eval import Case, EvalError, load_cases, load_chunks
from ctxbudget.eval._cases import as_cases, check_pool

GOLD = Chunk(id="c1", content="Refunds take 14 days.")


def _write(path: Path, *lines: object) -> Path:
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines), encoding="utf-8"
    )
    return path


def test_case_accepts_a_single_gold_chunk() -> None:
    case = Case(question="How long?", keywords=["14 days"], gold=GOLD)
    assert case.gold == (GOLD,)
    assert case.keywords == ("14 days",)


def test_case_accepts_a_list_of_gold_chunks() -> None:
    other = Chunk(id="c2", content="Exchanges are free.")
    assert Case(question="q", keywords=["k"], gold=[GOLD, other]).gold == (GOLD, other)


def test_case_rejects_repeated_gold_ids() -> None:
    with pytest.raises(ValueError, match=r"chunk ids must be unique, but got \['c1', 'c1'\]"):
        Case(question="q", keywords=["k"], gold=[GOLD, GOLD])


def test_case_rejects_a_blank_keyword() -> None:
    with pytest.raises(ValueError, match="a keyword is blank"):
        Case(question="q", keywords=["k", "  "], gold=GOLD)


def test_case_label_prefers_the_id() -> None:
    assert Case(question="q", keywords=["k"], gold=GOLD, id="refunds").label(3) == "case 'refunds'"
    assert Case(question="q", keywords=["k"], gold=GOLD).label(3) == "cases[3]"


def test_as_cases_accepts_mappings_and_cases() -> None:
    mapping = {"question": "q", "keywords": ["k"], "gold": {"id": "c9", "content": "text"}}
    cases = as_cases([mapping, Case(question="p", keywords=["k"], gold=GOLD)])
    assert [c.gold[0].id for c in cases] == ["c9", "c1"]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ({"keywords": ["k"], "gold": []}, r"cases\[0\]: field 'question': Field required"),
        ({"question": " ", "keywords": ["k"], "gold": GOLD}, "field 'question': must not be blank"),
        ({"question": "q", "keywords": "14 days", "gold": GOLD}, "field 'keywords': Input should"),
        ({"question": "q", "keywords": [], "gold": GOLD}, "field 'keywords': needs at least one"),
        ({"question": "q", "keywords": ["k"], "gold": []}, "field 'gold': needs at least one"),
        (
            {"question": "q", "keywords": ["k"], "gold": [{"id": "a", "contnt": "x"}]},
            r"field 'gold\[0\]': unknown Chunk field 'contnt'; did you mean 'content'",
        ),
        (
            {"question": "q", "keywords": ["k"], "gold": GOLD, "answer": "x"},
            "field 'answer': Extra inputs are not permitted",
        ),
    ],
)
def test_as_cases_names_the_case_and_field(case: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalError, match=message):
        as_cases([case])


def test_as_cases_rejects_one_case_not_in_a_list() -> None:
    one: Any = {"question": "q", "keywords": ["k"], "gold": GOLD}
    with pytest.raises(EvalError, match="got one dict; wrap it in a list"):
        as_cases(one)


def test_as_cases_rejects_an_item_of_another_type() -> None:
    with pytest.raises(EvalError, match=r"cases\[1\] is a str; expected a Case or a mapping"):
        as_cases([Case(question="q", keywords=["k"], gold=GOLD), "q"])  # type: ignore[list-item]


def test_as_cases_rejects_no_cases() -> None:
    with pytest.raises(EvalError, match="no cases given"):
        as_cases([])


def test_check_pool_rejects_a_non_sequence() -> None:
    with pytest.raises(EvalError, match="pool must be a sequence of Chunk, but got str"):
        check_pool("chunks")  # type: ignore[arg-type]


def test_check_pool_rejects_an_item_that_is_not_a_chunk() -> None:
    with pytest.raises(EvalError, match=r"pool\[1\] is a dict, expected ctxbudget.Chunk"):
        check_pool([GOLD, {"id": "x"}])  # type: ignore[list-item]


def test_check_pool_rejects_repeated_ids() -> None:
    with pytest.raises(EvalError, match=r"pool\[1\]: chunk id 'c1' appears twice"):
        check_pool([GOLD, GOLD])


def test_load_chunks_reads_one_chunk_per_line_skipping_blank_lines(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "chunks.jsonl", {"id": "a", "content": "x"}, "", {"id": "b", "content": "y"}
    )
    assert [c.id for c in load_chunks(path)] == ["a", "b"]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "content": "x"}', '{"id": "b", "content": '], r"line 2: not valid JSON"),
        (["[1, 2]"], "line 1: expected a JSON object, but got a list"),
        ([{"id": "a"}], "line 1: field 'content': Field required"),
        (
            [{"id": "a", "content": "x"}, {"id": "a", "content": "y"}],
            "line 2: chunk id 'a' was already used on line 1",
        ),
        (["", "  "], "holds no chunks"),
    ],
)
def test_load_chunks_errors_name_the_line(tmp_path: Path, lines: list[Any], message: str) -> None:
    path = _write(tmp_path / "chunks.jsonl", *lines)
    with pytest.raises(EvalError, match=message):
        load_chunks(path)


def test_load_chunks_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_chunks(tmp_path / "nope.jsonl")


def test_load_cases_resolves_gold_ids(tmp_path: Path) -> None:
    other = Chunk(id="c2", content="Exchanges are free.")
    path = _write(
        tmp_path / "cases.jsonl",
        {"question": "How long?", "keywords": ["14 days"], "gold": "c1", "id": "refunds"},
        {"question": "Exchanges?", "keywords": ["free"], "gold": ["c2", "c1"]},
    )
    cases = load_cases(path, [GOLD, other])
    assert cases[0].gold == (GOLD,)
    assert cases[0].id == "refunds"
    assert cases[1].gold == (other, GOLD)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            {"question": "q", "keywords": ["k"]},
            "line 1: field 'gold' must be a chunk id or a list of chunk ids, but got nothing",
        ),
        ({"question": "q", "keywords": ["k"], "gold": 3}, "but got a int"),
        ({"question": "q", "keywords": ["k"], "gold": ["c1", 2]}, "but got a list"),
        (
            {"question": "q", "keywords": ["k"], "gold": ["c1", "c7"]},
            "line 1: field 'gold': chunk id 'c7' is not among the 1 chunks given",
        ),
        ({"question": "q", "keywords": "k", "gold": "c1"}, "line 1: field 'keywords': Input"),
    ],
)
def test_load_cases_errors_name_the_line_and_field(
    tmp_path: Path, line: dict[str, Any], message: str
) -> None:
    path = _write(tmp_path / "cases.jsonl", line)
    with pytest.raises(EvalError, match=message):
        load_cases(path, [GOLD])


def test_load_cases_rejects_an_empty_file(tmp_path: Path) -> None:
    with pytest.raises(EvalError, match="holds no cases"):
        load_cases(_write(tmp_path / "cases.jsonl", ""), [GOLD])


def test_load_cases_checks_the_chunks(tmp_path: Path) -> None:
    path = _write(tmp_path / "cases.jsonl", {"question": "q", "keywords": ["k"], "gold": "c1"})
    with pytest.raises(EvalError, match=r"chunks\[1\]: chunk id 'c1' appears twice"):
        load_cases(path, [GOLD, GOLD])
