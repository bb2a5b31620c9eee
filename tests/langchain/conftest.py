"""LangChain adapter fixtures: an assembler with a small budget and a recording chat model."""

from __future__ import annotations

import pytest

from ctxbudget import ContextAssembler
from tests.support.langchain_stack import RecordingChatModel, small_budget


@pytest.fixture
def assembler() -> ContextAssembler:
    return ContextAssembler(tokenizer="gpt-4o", budget=small_budget())


@pytest.fixture
def model() -> RecordingChatModel:
    return RecordingChatModel()
