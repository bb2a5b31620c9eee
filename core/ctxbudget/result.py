"""The assembled prompt: as one string, as chat messages, with its sources and report."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from pydantic import BaseModel, ConfigDict

from ctxbudget.citations import CitationCheck, check_citations
from ctxbudget.inputs import Chunk, Role, Tool
from ctxbudget.layout import SECTION_SEPARATOR
from ctxbudget.report import Report

__all__ = ["Assembled", "CacheControl", "Message", "Source", "TextBlock"]


class CacheControl(TypedDict):
    type: Literal["ephemeral"]


class TextBlock(TypedDict):
    """A content block; `cache_control` marks the end of the cacheable prefix."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class Message(TypedDict):
    """A chat message in the shape OpenAI's and Anthropic's APIs both accept."""

    role: Role
    content: str | list[TextBlock]


class Source(BaseModel):
    """What ``[n]`` in the prompt refers to."""

    model_config = ConfigDict(frozen=True)

    n: int
    chunk: Chunk
    """The chunk shown as [n]; for an escalated document, the whole document."""
    document: bool = False
    """True when [n] is a whole document sent in place of its chunks."""
    covers: tuple[str, ...] = ()
    """For an escalated document: the ids of the retrieved chunks it contains."""

    def __repr__(self) -> str:
        kind = ", document" if self.document else ""
        return f"Source(n={self.n}, chunk={self.chunk!r}{kind})"


class Assembled(BaseModel):
    """The outcome of one assembly. Same inputs, same bytes."""

    model_config = ConfigDict(frozen=True)

    text: str
    """The whole prompt as one string; its exact token count is `report.total`."""
    prefix: tuple[str, ...]
    """The stable sections (system, examples, tools), in order; the cacheable prefix."""
    history: tuple[tuple[Role, str], ...]
    """Kept conversation turns as (role, content), gap markers included."""
    tail: str
    """Everything after the history: memory, the fenced sources, and the question."""
    sources: tuple[Source, ...]
    tools: tuple[Tool, ...]
    """The tools that were kept, to pass to the provider's tools parameter as well."""
    report: Report

    def messages(self) -> list[Message]:
        """The prompt as chat messages: the prefix as a system message whose last block
        carries Anthropic's ``cache_control`` breakpoint, then the history, then one user
        message with the rest.

        The budget is guaranteed on `text`; providers add a few tokens of overhead per
        message on top of the content.
        """
        out: list[Message] = []
        if self.prefix:
            blocks: list[TextBlock] = [{"type": "text", "text": t} for t in self.prefix]
            blocks[-1]["cache_control"] = {"type": "ephemeral"}
            out.append({"role": "system", "content": blocks})
        out.extend({"role": role, "content": content} for role, content in self.history)
        out.append({"role": "user", "content": self.tail})
        return out

    def check_citations(self, answer: str) -> CitationCheck:
        """Citations in `answer` that point nowhere, and sources it never cites."""
        return check_citations(answer, len(self.sources))

    @property
    def prefix_text(self) -> str:
        """The cacheable prefix as it stands at the start of `text`."""
        return SECTION_SEPARATOR.join(self.prefix)
