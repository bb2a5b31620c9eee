"""The tools claimant: tool descriptions, dropped whole, least relevant first."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ctxbudget._claims import ListClaim
from ctxbudget.budget import Allocation
from ctxbudget.errors import InputError
from ctxbudget.inputs import Tool
from ctxbudget.layout import FRAMES
from ctxbudget.tokens import TokenCounter

__all__ = ["render_tool", "tools_claim"]


def render_tool(tool: Tool) -> str:
    """A tool as the model reads it: name, description, and the argument schema as compact JSON."""
    line = f"{tool.name}: {tool.description}" if tool.description else tool.name
    if not tool.parameters:
        return line
    schema = json.dumps(tool.parameters, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{line}\nParameters: {schema}"


def tools_claim(
    allocation: Allocation, tools: Sequence[Tool], *, counter: TokenCounter
) -> ListClaim[Tool]:
    """Tools kept by relevance (score, else the order given), shown in the order given.

    Showing them in input order keeps the cacheable prefix byte-identical whenever
    the same tools survive, whatever their scores were this time.
    """
    position = {}
    for index, tool in enumerate(tools):
        if tool.name in position:
            raise InputError(
                f"tool name {tool.name!r} is given twice; tool names must be unique in a request"
            )
        position[tool.name] = index
    by_relevance = sorted(
        tools,
        key=lambda t: (t.score is None, -(t.score or 0.0), position[t.name]),
    )
    return ListClaim(
        allocation,
        by_relevance,
        counter=counter,
        frame=FRAMES["tools"],
        kind="tool",
        key=lambda t: t.name,
        text=render_tool,
        display=lambda t: position[t.name],
    )
