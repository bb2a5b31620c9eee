"""Retrieval that found permitted sources but could send none is never a silent success: an
error when the retrieved allocation has a floor, a warning naming the sources otherwise."""

from __future__ import annotations

import logging

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda

from ctxbudget import Allocation, Budget, ContextAssembler, ContextBudgetError
from tests.support.factories import passage
from tests.support.langchain_stack import PATHS, Path, RecordingChatModel, chain_for

QUESTION = "How long do refunds take?"
OVERSIZE = [Document(passage(i), id=f"manual-{i}") for i in range(3)]
"""Three permitted, relevant sources of 708 tokens each: none fits 300."""


def assembler_with_floor(floor: int) -> ContextAssembler:
    budget = Budget(
        total=4_000,
        reserve_output=0,
        allocations=(Allocation("retrieved", min=floor, max=300, priority=1),),
    )
    return ContextAssembler(tokenizer="gpt-4o", budget=budget)


@pytest.mark.parametrize("path", PATHS)
def test_no_source_fits_above_a_floor_is_an_error(path: Path, model: RecordingChatModel) -> None:
    chain = chain_for(path, RunnableLambda(lambda _: OVERSIZE), assembler_with_floor(100), model)
    with pytest.raises(
        ContextBudgetError, match=r"3 permitted, relevant source\(s\) were found but none fits"
    ):
        chain.invoke(QUESTION)
    assert model.received == []


@pytest.mark.parametrize("path", PATHS)
def test_no_source_fits_without_a_floor_warns_naming_them(
    path: Path, model: RecordingChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    chain = chain_for(path, RunnableLambda(lambda _: OVERSIZE), assembler_with_floor(0), model)
    with caplog.at_level(logging.WARNING, logger="ctxbudget"):
        chain.invoke(QUESTION)
    [record] = [r for r in caplog.records if "no source fits" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert "manual-0, manual-1, manual-2" in record.getMessage()
    sent = "\n".join(str(m.content) for m in model.received[0])
    assert all(document.page_content[:40] not in sent for document in OVERSIZE)
