"""How exact a report's counts are: `Report.count_exact`, `count_method`, `count_margin`, as
dumped and validated back, and as an assembly with each kind of tokenizer reports them."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from ctxbudget import CallableTokenizer, ContextAssembler, Report
from tests.support.factories import chunk

_FIELDS: dict[str, Any] = {
    "budget": 100,
    "total": 60,
    "unused": 40,
    "sizes": {"retrieved": 60},
    "granted": {"retrieved": 80},
    "trimmed": (),
    "dropped": (),
    "retrieval_trimmed": False,
    "trimmed_by": {},
    "escalated": None,
    "prefix_tokens": 0,
    "prefix_hash": "0" * 64,
    "prefix_warnings": (),
    "final_check_drops": 0,
}

_COUNT = ("count_exact", "count_method", "count_margin")

_ESTIMATE: dict[str, Any] = {
    "count_exact": False,
    "count_method": "estimate:claude-v3",
    "count_margin": 0.1,
}


def test_report_counts_are_exact_unless_it_says_otherwise() -> None:
    report = Report(**_FIELDS)

    assert (report.count_exact, report.count_method, report.count_margin) == (True, None, None)


def test_report_of_exact_count_dumps_as_before_counts_were_labelled() -> None:
    report = Report(**_FIELDS)

    assert not set(_COUNT) & set(report.model_dump())
    assert not set(_COUNT) & set(json.loads(report.model_dump_json()))


def test_report_of_estimate_dumps_its_method_and_margin() -> None:
    dumped = json.loads(Report(**_FIELDS, **_ESTIMATE).model_dump_json())

    assert {k: dumped[k] for k in _COUNT} == _ESTIMATE


def test_report_of_estimate_validates_back_from_its_dump() -> None:
    report = Report(**_FIELDS, **_ESTIMATE)

    assert Report.model_validate_json(report.model_dump_json()) == report


def test_report_of_exact_count_validates_back_from_its_dump() -> None:
    report = Report(**_FIELDS)

    assert Report.model_validate_json(report.model_dump_json()) == report


def _report(tokenizer: str | CallableTokenizer) -> Report:
    assembler = ContextAssembler(tokenizer=tokenizer)
    return assembler.assemble(question="What is the refund policy?", chunks=[chunk()]).report


def test_assembled_report_of_openai_model_is_exact() -> None:
    report = _report("gpt-4o")

    assert (report.count_exact, report.count_method, report.count_margin) == (True, None, None)
    assert not set(_COUNT) & set(report.model_dump())


def test_assembled_report_of_claude_is_a_labelled_upper_bound() -> None:
    report = _report("claude-sonnet-4-5")

    assert (report.count_exact, report.count_method, report.count_margin) == (
        False,
        "estimate:claude-v3",
        0.1,
    )
    assert report.model_dump()["count_method"] == "estimate:claude-v3"


def test_assembled_report_of_callable_tokenizer_is_inexact() -> None:
    report = _report(CallableTokenizer(len, name="chars"))

    assert (report.count_exact, report.count_method) == (False, "callable:chars")


def test_assembled_report_logged_for_estimate_carries_its_method(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="ctxbudget"):
        _report("gemini-2.5-flash")

    (record,) = [r for r in caplog.records if hasattr(r, "ctxbudget")]
    assert record.ctxbudget["count_method"] == "estimate:gemini"
