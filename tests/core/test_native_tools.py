"""Native tool calling: tools kept out of the text, their schemas counted against the budget."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter

from ctxbudget import ContextAssembler, InputError, Tool, get_tokenizer
from ctxbudget._tools import tool_schema
from tests.support.factories import budget_for

TOOLS = [
    Tool(
        name=f"tool_{i}",
        description=f"Does thing {i}. " * 10,
        parameters={"type": "object", "properties": {"x": {"type": "string"}}},
        score=1 - i / 10,
    )
    for i in range(6)
]


def native(tools_max: int | None = None, total: int = 5_000) -> ContextAssembler:
    budget = budget_for("tools", tools_max, total=total)
    return ContextAssembler(tokenizer="o200k_base", budget=budget, native_tools=True)


def test_native_tools_are_not_in_the_text_but_count_against_the_budget() -> None:
    result = native().assemble(question="Why?", tools=TOOLS)
    o200k = get_tokenizer("o200k_base")
    schemas = sum(o200k.count(tool_schema(t)) for t in TOOLS)
    assert "<tools>" not in result.text
    assert "tool_0" not in result.text
    assert result.report.tool_schema_tokens == schemas
    assert result.report.total == o200k.count(result.text) + schemas
    assert result.report.sizes["tools"] == schemas
    assert [t.name for t in result.tools] == [t.name for t in TOOLS]


def test_native_tools_are_dropped_whole_least_relevant_first_within_their_max() -> None:
    one = get_tokenizer("o200k_base").count(tool_schema(TOOLS[0]))
    result = native(tools_max=one * 3 + 2).assemble(question="Why?", tools=TOOLS)
    assert [t.name for t in result.tools] == ["tool_0", "tool_1", "tool_2"]
    assert {d.id for d in result.report.dropped} == {"tool_3", "tool_4", "tool_5"}
    assert result.report.total <= result.report.budget


def test_native_tools_keep_the_total_within_a_tight_budget() -> None:
    assembler = native(total=300)
    result = assembler.assemble(question="Why?", tools=TOOLS)
    assert result.report.total <= 300
    assert result.report.tool_schema_tokens + get_tokenizer("o200k_base").count(result.text) == (
        result.report.total
    )


def test_native_tool_schemas_enter_the_prefix_hash() -> None:
    changed = [TOOLS[0].model_copy(update={"description": "Something else."}), *TOOLS[1:]]
    first = native().assemble(question="Why?", tools=TOOLS)
    second = native().assemble(question="Why?", tools=changed)
    assert first.text == second.text
    assert first.report.prefix_hash != second.report.prefix_hash


def test_tool_schemas_match_what_the_provider_sdks_accept() -> None:
    from anthropic.types import ToolParam
    from openai.types.chat import ChatCompletionToolParam

    bare = Tool(name="ping", description="Check the service.")
    result = native().assemble(question="Why?", tools=[*TOOLS[:2], bare])
    openai_tools = result.tool_schemas(style="openai")
    anthropic_tools = result.tool_schemas(style="anthropic")
    for openai_tool in openai_tools:
        TypeAdapter(ChatCompletionToolParam).validate_python(openai_tool, strict=True)
    for anthropic_tool in anthropic_tools:
        TypeAdapter(ToolParam).validate_python(anthropic_tool, strict=True)
    assert openai_tools[2]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert anthropic_tools[0]["input_schema"] == TOOLS[0].parameters
    json.dumps([openai_tools, anthropic_tools])


def test_tool_schemas_reject_an_unknown_style() -> None:
    result = native().assemble(question="Why?", tools=TOOLS[:1])
    with pytest.raises(
        InputError, match=r"style must be 'openai', 'anthropic', 'bedrock' or 'gemini', but got 'x'"
    ):
        result.tool_schemas(style="x")  # type: ignore[call-overload]
