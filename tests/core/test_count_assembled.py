"""What an assembly's report says of its counts: the tokenizer's method, exactness and margin."""

from __future__ import annotations

import logging

import pytest

from ctxbudget import CallableTokenizer, ContextAssembler, Report
from tests.support.factories import chunk

_COUNT = ("count_exact", "count_method", "count_margin")


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
