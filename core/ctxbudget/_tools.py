"""The tools claimant: tool descriptions, dropped whole, least relevant first.

Tool descriptions often come from MCP servers, that is from third parties: a tool is
rendered through `_neutralise.neutralise_section`, so its text cannot close ``<tools>``,
forge a turn or a source, or inject a ``System:`` line into the cached prefix.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence

from ctxbudget._budget import Allocation
from ctxbudget._claims import ListClaim, Outcome
from ctxbudget._errors import InputError
from ctxbudget._inputs import Tool
from ctxbudget._layout import FRAMES
from ctxbudget._neutralise import neutralise_section
from ctxbudget._pack import Fit
from ctxbudget._tokens import CountCache

__all__ = ["ToolsClaim", "render_tool", "tool_schema", "tools_claim"]


class ToolsClaim(ListClaim[Tool]):
    """Tools packed whole by relevance; the result lists those kept, in the order shown."""

    def outcome(self, fit: Fit[Tool]) -> Outcome:
        return Outcome(tools=tuple(self.kept(fit)))


def render_tool(tool: Tool, *, neutralised: Callable[[str], str] = neutralise_section) -> str:
    """A tool as the model reads it: name, description, and the argument schema as compact
    JSON, `neutralised` (a tool named ``user`` reads ``user (quoted): ...``)."""
    line = f"{tool.name}: {tool.description}" if tool.description else tool.name
    if tool.parameters:
        schema = json.dumps(
            tool.parameters, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        line = f"{line}\nParameters: {schema}"
    return neutralised(line)


def tool_schema(tool: Tool) -> str:
    """A tool as a provider receives it for native tool calling, as compact JSON: what is
    counted against the budget when tools are kept out of the text."""
    schema = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tools_claim(
    allocation: Allocation, tools: Sequence[Tool], *, counter: CountCache, native: bool = False
) -> ToolsClaim:
    """Tools kept by relevance (score, else the order given), shown in the order given.

    Showing them in input order keeps the cacheable prefix byte-identical whenever
    the same tools survive, whatever their scores were this time. `native` tools are
    sent beside the prompt (the provider's tools parameter): not rendered, their
    schemas counted.
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
    # Allocation packs the tools several times and each pack reads every tool's text; an
    # agent resends the same tools on every request, so neutralising is remembered too.
    texts: dict[str, str] = {}
    remembered = functools.partial(counter.rewritten, rewrite=neutralise_section)

    def text(tool: Tool) -> str:
        found = texts.get(tool.name)
        if found is None:
            found = texts[tool.name] = (
                tool_schema(tool) if native else render_tool(tool, neutralised=remembered)
            )
        return found

    return ToolsClaim(
        allocation,
        by_relevance,
        counter=counter,
        frame=FRAMES["tools"],
        kind="tool",
        key=lambda t: t.name,
        text=text,
        display=lambda t: position[t.name],
        outside_text=native,
    )
