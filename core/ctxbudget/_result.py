"""The assembled prompt: as one string, as chat messages, with its sources and report.

`Assembled.messages()` shapes the same prompt for a chat API (docs/results.md,
"Chat messages for each SDK"):
``style="openai"`` for Chat Completions, ``style="anthropic"`` for the Messages API,
``style="bedrock"`` for Bedrock's Converse API, ``style="gemini"`` for google-genai's
``generate_content``, and the default ``"generic"`` shape kept from earlier releases.
`Assembled.search_result_messages` gives the Anthropic shape with each source a
``search_result`` block for its citations API, and `Assembled.anthropic_citations` maps the
answer's cited spans back to sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict, overload

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._citations import CitationCheck, check_citations
from ctxbudget._errors import ContextBudgetError, InputError
from ctxbudget._history import ROLE_LABELS
from ctxbudget._inputs import Chunk, Role, Tool
from ctxbudget._layout import SECTION_SEPARATOR
from ctxbudget._report import Report
from ctxbudget._tokens import Tokenizer

__all__ = [
    "CONVERSATION_START",
    "AnthropicMessage",
    "AnthropicPrompt",
    "AnthropicTool",
    "Assembled",
    "BedrockMessage",
    "BedrockPrompt",
    "BedrockTool",
    "CacheControl",
    "CitedSpan",
    "GeminiContent",
    "GeminiFunction",
    "GeminiPrompt",
    "Message",
    "MessageStyle",
    "OpenAIMessage",
    "OpenAITool",
    "SearchResultBlock",
    "SearchResultPrompt",
    "Source",
    "TextBlock",
]

MessageStyle = Literal["generic", "openai", "anthropic", "bedrock", "gemini"]
"""Which chat API `Assembled.messages` shapes its output for."""

CONVERSATION_START: Final = "[conversation start]"
"""The user note put before a history that opens with an assistant turn, in the OpenAI and
Anthropic styles: after the system prompt, a request starts with the user (the Messages API
requires it)."""


class CacheControl(TypedDict):
    """Anthropic's prompt-cache breakpoint."""

    type: Literal["ephemeral"]


class TextBlock(TypedDict):
    """A text content block; `cache_control` marks the end of the cacheable prefix."""

    type: Literal["text"]
    text: str
    cache_control: NotRequired[CacheControl]


class Message(TypedDict):
    """A chat message in the generic style: history roles as given, the prefix as a
    system message of text blocks whose last block carries Anthropic's ``cache_control``.

    Neither SDK accepts it verbatim when the history holds a ``tool`` turn, and OpenAI
    does not define ``cache_control``; use ``style="openai"`` or ``style="anthropic"``
    to call a provider's SDK directly.
    """

    role: Role
    content: str | list[TextBlock]


class OpenAIMessage(TypedDict):
    """A message for OpenAI Chat Completions (``client.chat.completions.create``)."""

    role: Literal["system", "user", "assistant"]
    content: str


class AnthropicMessage(TypedDict):
    """A message for Anthropic's Messages API; roles alternate, starting with the user."""

    role: Literal["user", "assistant"]
    content: list[TextBlock]


class AnthropicPrompt(TypedDict):
    """The ``system`` and ``messages`` arguments of Anthropic's ``client.messages.create``.

    >>> client.messages.create(**result.messages(style="anthropic"),  # doctest: +SKIP
    ...                        model=MODEL, max_tokens=1024)
    """

    system: NotRequired[list[TextBlock]]
    """The cacheable prefix; absent when there is none. Its last block is the breakpoint."""
    messages: list[AnthropicMessage]


class BedrockText(TypedDict):
    """A Converse text content block."""

    text: str


class BedrockCachePoint(TypedDict):
    """A Converse prompt-cache checkpoint: what comes before it is the cacheable prefix."""

    cachePoint: dict[Literal["type"], Literal["default"]]


class BedrockMessage(TypedDict):
    """A message for Bedrock's Converse API; roles alternate, starting with the user."""

    role: Literal["user", "assistant"]
    content: list[BedrockText]


class BedrockPrompt(TypedDict):
    """The ``system`` and ``messages`` arguments of boto3's ``bedrock-runtime`` ``converse``.

    >>> client.converse(modelId=MODEL, **result.messages(style="bedrock"))  # doctest: +SKIP
    """

    system: NotRequired[list[BedrockText | BedrockCachePoint]]
    """The cacheable prefix, then a cache checkpoint; absent when there is no prefix."""
    messages: list[BedrockMessage]


class GeminiPart(TypedDict):
    """A text part of a google-genai ``Content``."""

    text: str


class GeminiContent(TypedDict):
    """A google-genai ``Content``: one turn (``"model"`` is the assistant), or the system
    instruction (no role)."""

    role: NotRequired[Literal["user", "model"]]
    parts: list[GeminiPart]


class GeminiConfig(TypedDict):
    """The part of google-genai's ``GenerateContentConfig`` the prompt fills."""

    system_instruction: GeminiContent


class GeminiPrompt(TypedDict):
    """The ``contents`` and ``config`` arguments of google-genai's
    ``client.models.generate_content``.

    >>> client.models.generate_content(  # doctest: +SKIP
    ...     model=MODEL, **result.messages(style="gemini"))
    """

    contents: list[GeminiContent]
    config: NotRequired[GeminiConfig]
    """The cacheable prefix as the system instruction; absent when there is no prefix."""


class CitationsConfig(TypedDict):
    """Anthropic's switch for cited spans in the answer."""

    enabled: bool


class _PlainText(TypedDict):
    type: Literal["text"]
    text: str


class SearchResultBlock(TypedDict):
    """One source as Anthropic's ``search_result`` content block, citations enabled."""

    type: Literal["search_result"]
    source: str
    """``[n]``: the number the source has in the text form of the prompt."""
    title: str
    """The source's ``[n]`` header line, as the text form shows it."""
    content: list[_PlainText]
    """The source's neutralised content, one text block."""
    citations: CitationsConfig


class SearchResultMessage(TypedDict):
    """An Anthropic message whose blocks may include search results."""

    role: Literal["user", "assistant"]
    content: list[TextBlock | SearchResultBlock]


class SearchResultPrompt(TypedDict):
    """``client.messages.create(**...)`` arguments with the sources as search results."""

    system: NotRequired[list[TextBlock]]
    messages: list[SearchResultMessage]


class CitedSpan(BaseModel):
    """One span of an Anthropic answer cited by the provider, mapped back to its source."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="The source's number, [n].")
    id: str = Field(description="The cited chunk's id (for a whole document, its id).")
    cited_text: str = Field(description="The text the provider says was cited.")
    answer_block: int = Field(description="Index of the answer's content block that cites it.")


def _no_arguments() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class OpenAITool(TypedDict):
    """A tool for OpenAI Chat Completions' ``tools`` parameter."""

    type: Literal["function"]
    function: dict[str, Any]


class AnthropicTool(TypedDict):
    """A tool for Anthropic's Messages API ``tools`` parameter."""

    name: str
    description: str
    input_schema: dict[str, Any]


class BedrockTool(TypedDict):
    """A tool for Converse's ``toolConfig={"tools": [...]}``."""

    toolSpec: dict[str, Any]


class GeminiFunction(TypedDict):
    """A function declaration for google-genai's ``tools=[{"function_declarations": [...]}]``."""

    name: str
    description: str
    parameters_json_schema: dict[str, Any]


class Source(BaseModel):
    """What ``[n]`` in the prompt refers to."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="The number the prompt shows, as [n]; 1 for the first source.")
    chunk: Chunk = Field(
        description="The chunk shown as [n]; for an escalated document, the whole document."
    )
    text: str = Field(
        description="The source as the prompt shows it: its [n] header and its neutralised "
        "content (what a framework node or document should carry)."
    )
    document: bool = Field(
        default=False, description="True when [n] is a whole document sent in place of its chunks."
    )
    covers: tuple[str, ...] = Field(
        default=(),
        description="For an escalated document: the ids of the retrieved chunks it contains.",
    )

    def __repr__(self) -> str:
        kind = ", document" if self.document else ""
        return f"Source(n={self.n}, chunk={self.chunk!r}{kind})"


class Assembled(BaseModel):
    """The outcome of one assembly. Same inputs, same bytes."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(
        description="The whole prompt as one string; its exact token count is report.total."
    )
    prefix: tuple[str, ...] = Field(
        description="The stable sections (system, examples, tools), in order: the cacheable "
        "prefix, as it starts `text`."
    )
    history: tuple[tuple[Role, str], ...] = Field(
        description="Kept conversation turns as (role, content), in order; a gap marker such "
        "as ('user', '[… 3 messages omitted …]'), or a summary, stands where turns were left "
        "out; a cleared tool result's content is its placeholder."
    )
    history_turns: tuple[int | None, ...] = Field(
        default=(),
        description="For each entry of `history`: the index of the input turn it is, or None "
        "for a gap marker or summary. What an adapter maps back to its own messages.",
    )
    cleared: tuple[int, ...] = Field(
        default=(),
        description="Indices of the kept history turns whose content was cleared (their entry "
        "in `history` holds the placeholder to send), ascending.",
    )
    tail: str = Field(
        description="Everything after the history: memory, the fenced sources and the "
        "question; '' when there are none (question=None continues the history). The last "
        "chat message carries it."
    )
    sources: tuple[Source, ...] = Field(
        description="What each [n] in the prompt refers to, in prompt order."
    )
    tools: tuple[Tool, ...] = Field(
        description="The tools that were kept, to pass to the provider's tools parameter too."
    )
    report: Report = Field(description="Every decision of this assembly: sizes, drops, prefix.")

    @overload
    def messages(self, *, style: Literal["generic"] = ...) -> list[Message]: ...
    @overload
    def messages(self, *, style: Literal["openai"]) -> list[OpenAIMessage]: ...
    @overload
    def messages(self, *, style: Literal["anthropic"]) -> AnthropicPrompt: ...
    @overload
    def messages(self, *, style: Literal["bedrock"]) -> BedrockPrompt: ...
    @overload
    def messages(self, *, style: Literal["gemini"]) -> GeminiPrompt: ...
    @overload
    def messages(
        self, *, style: MessageStyle
    ) -> list[Message] | list[OpenAIMessage] | AnthropicPrompt | BedrockPrompt | GeminiPrompt: ...

    def messages(
        self, *, style: MessageStyle = "generic"
    ) -> list[Message] | list[OpenAIMessage] | AnthropicPrompt | BedrockPrompt | GeminiPrompt:
        """The prompt as chat messages: the cacheable prefix first, the history, then one
        user message ending with `tail` (memory, sources, question). Without a question and
        a tail (``assemble(question=None)``), the messages end with the history's latest unit.

        - ``"openai"``: a list for ``client.chat.completions.create(messages=...)``. The
          prefix is one system message (a string; OpenAI caches prefixes on its own).
          History ``system`` and ``tool`` turns become user messages labelled
          ``System:`` / ``Tool:`` (a tool message needs a ``tool_call_id`` the history
          does not have); a history that opens with the assistant gets
          `CONVERSATION_START` before it.
        - ``"anthropic"``: ``{"system": [...], "messages": [...]}`` for
          ``client.messages.create(**...)``. The prefix is the system blocks, the last
          one marked with ``cache_control``. Messages alternate user/assistant and start
          with the user: consecutive same-role turns (gap markers, labelled
          ``System:``/``Tool:`` turns, the tail) merge into one message of several text
          blocks; blank user and assistant turns are left out (the API rejects empty
          text blocks); a history that opens with the assistant gets
          `CONVERSATION_START` before it.
        - ``"bedrock"``: ``{"system": [...], "messages": [...]}`` for boto3's
          ``converse(modelId=..., **...)``: the Anthropic style's turns as Converse text
          blocks, the prefix as system text blocks followed by a ``cachePoint``.
        - ``"gemini"``: ``{"contents": [...], "config": {"system_instruction": ...}}`` for
          google-genai's ``generate_content(model=..., **...)``: the Anthropic style's
          turns as ``Content`` parts (the assistant is ``"model"``), the prefix as the
          system instruction.
        - ``"generic"`` (default): the prefix as a system message of text blocks with the
          ``cache_control`` breakpoint, history roles as given, gap markers as user
          messages; the shape of earlier releases, accepted by neither SDK verbatim.

        The budget is guaranteed on `text`; providers add a few tokens per message.
        """
        if style == "generic":
            return self._generic()
        if style == "openai":
            return self._openai()
        if style == "anthropic":
            return self._anthropic()
        if style == "bedrock":
            return self._bedrock()
        if style == "gemini":
            return self._gemini()
        raise InputError(
            f"style must be 'generic', 'openai', 'anthropic', 'bedrock' or 'gemini', but got "
            f"{style!r}; pick the style of the SDK you pass the messages to"
        )

    def _system_blocks(self) -> list[TextBlock]:
        blocks: list[TextBlock] = [{"type": "text", "text": t} for t in self.prefix]
        blocks[-1]["cache_control"] = {"type": "ephemeral"}
        return blocks

    def _generic(self) -> list[Message]:
        out: list[Message] = []
        if self.prefix:
            out.append({"role": "system", "content": self._system_blocks()})
        out.extend({"role": role, "content": content} for role, content in self.history)
        if self.tail:
            out.append({"role": "user", "content": self.tail})
        return out

    def _openai(self) -> list[OpenAIMessage]:
        out: list[OpenAIMessage] = []
        if self.prefix:
            out.append({"role": "system", "content": self.prefix_text})
        turns = [_user_or_assistant(role, content) for role, content in self.history]
        if turns and turns[0][0] == "assistant":
            turns.insert(0, ("user", CONVERSATION_START))
        out.extend({"role": speaker, "content": text} for speaker, text in turns)
        if self.tail:
            out.append({"role": "user", "content": self.tail})
        return out

    def _alternating(self) -> list[tuple[Literal["user", "assistant"], list[str]]]:
        """The turns as the Anthropic, Bedrock and Gemini styles send them: user and
        assistant alternating from the user, blank turns left out, the tail last."""
        turns = [_user_or_assistant(role, content) for role, content in self.history]
        turns = [turn for turn in turns if turn[1].strip()]
        if turns and turns[0][0] == "assistant":
            turns.insert(0, ("user", CONVERSATION_START))
        if self.tail:
            turns.append(("user", self.tail))
        merged: list[tuple[Literal["user", "assistant"], list[str]]] = []
        for speaker, text in turns:
            if merged and merged[-1][0] == speaker:
                merged[-1][1].append(text)
            else:
                merged.append((speaker, [text]))
        return merged

    def _anthropic(self) -> AnthropicPrompt:
        messages: list[AnthropicMessage] = [
            {"role": speaker, "content": [{"type": "text", "text": t} for t in texts]}
            for speaker, texts in self._alternating()
        ]
        prompt: AnthropicPrompt = {"messages": messages}
        if self.prefix:
            prompt["system"] = self._system_blocks()
        return prompt

    def _bedrock(self) -> BedrockPrompt:
        messages: list[BedrockMessage] = [
            {"role": speaker, "content": [{"text": t} for t in texts]}
            for speaker, texts in self._alternating()
        ]
        prompt: BedrockPrompt = {"messages": messages}
        if self.prefix:
            system: list[BedrockText | BedrockCachePoint] = [{"text": t} for t in self.prefix]
            system.append({"cachePoint": {"type": "default"}})
            prompt["system"] = system
        return prompt

    def _gemini(self) -> GeminiPrompt:
        contents: list[GeminiContent] = [
            {
                "role": "model" if speaker == "assistant" else "user",
                "parts": [{"text": t} for t in texts],
            }
            for speaker, texts in self._alternating()
        ]
        prompt: GeminiPrompt = {"contents": contents}
        if self.prefix:
            prompt["config"] = {"system_instruction": {"parts": [{"text": t} for t in self.prefix]}}
        return prompt

    @overload
    def tool_schemas(self, *, style: Literal["openai"]) -> list[OpenAITool]: ...

    @overload
    def tool_schemas(self, *, style: Literal["anthropic"]) -> list[AnthropicTool]: ...

    @overload
    def tool_schemas(self, *, style: Literal["bedrock"]) -> list[BedrockTool]: ...

    @overload
    def tool_schemas(self, *, style: Literal["gemini"]) -> list[GeminiFunction]: ...

    def tool_schemas(
        self, *, style: Literal["openai", "anthropic", "bedrock", "gemini"]
    ) -> list[OpenAITool] | list[AnthropicTool] | list[BedrockTool] | list[GeminiFunction]:
        """The kept tools in the shape a provider's ``tools`` parameter takes, in the order
        given (for ``ContextAssembler(native_tools=True)``, whose budget counted them):
        Bedrock's go in ``toolConfig={"tools": ...}``, Gemini's in
        ``tools=[{"function_declarations": ...}]``."""
        if style == "openai":
            openai: list[OpenAITool] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters or _no_arguments(),
                    },
                }
                for t in self.tools
            ]
            return openai
        if style == "anthropic":
            anthropic: list[AnthropicTool] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.parameters or _no_arguments(),
                }
                for t in self.tools
            ]
            return anthropic
        if style == "bedrock":
            bedrock: list[BedrockTool] = [
                {
                    "toolSpec": {
                        "name": t.name,
                        "description": t.description,
                        "inputSchema": {"json": t.parameters or _no_arguments()},
                    }
                }
                for t in self.tools
            ]
            return bedrock
        if style == "gemini":
            gemini: list[GeminiFunction] = [
                {
                    "name": t.name,
                    "description": t.description,
                    "parameters_json_schema": t.parameters or _no_arguments(),
                }
                for t in self.tools
            ]
            return gemini
        raise InputError(
            f"style must be 'openai', 'anthropic', 'bedrock' or 'gemini', but got {style!r}"
        )

    def search_result_messages(self, tokenizer: Tokenizer) -> SearchResultPrompt:
        """``style="anthropic"`` messages for Anthropic's citations API: each source a
        ``search_result`` block (``citations: {"enabled": True}``) between the fence's
        opening and closing text, everything else as `messages` gives it.

        Every text sent (system and message blocks, each source's ``source``, ``title`` and
        content) is counted with `tokenizer` (the assembler's, ``assembler.counter.tokenizer``)
        and must fit the budget with the native tool schemas; `ContextBudgetError` otherwise,
        with the numbers: the block form repeats each ``[n]`` as its ``source``.
        """
        prompt = self._anthropic()
        messages: list[SearchResultMessage] = [
            {"role": m["role"], "content": list(m["content"])} for m in prompt["messages"]
        ]
        if self.sources:
            # With sources there is a tail, and `_anthropic` makes it the last block sent.
            messages[-1]["content"][-1:] = self._search_results()
        out: SearchResultPrompt = {"messages": messages}
        if "system" in prompt:
            out["system"] = prompt["system"]
        sent = sum(tokenizer.count(text) for text in _texts(out))
        needed = sent + self.report.tool_schema_tokens
        if needed > self.report.budget:
            raise ContextBudgetError(
                "retrieved",
                needed,
                self.report.budget,
                "as search_result blocks, each source repeats its [n] as its source: leave "
                "that much room (a larger reserve_output or a smaller retrieved max)",
            )
        return out

    def _search_results(self) -> list[TextBlock | SearchResultBlock]:
        """The tail as blocks: the text up to the first source (memory, the fence opening),
        a search result per source, and the text after the last (fence close, question)."""
        joined = SECTION_SEPARATOR.join(s.text for s in self.sources)
        start = self.tail.find(joined)
        markdown = all(s.text.startswith(f"[{s.n}]") for s in self.sources)
        if start < 0 or not markdown:
            raise InputError(
                "the sources are not one block of markdown sources in this prompt's tail: "
                "search_result blocks take markdown sources (source_format='markdown')"
            )
        blocks: list[TextBlock | SearchResultBlock] = [{"type": "text", "text": self.tail[:start]}]
        for source in self.sources:
            title, _, content = source.text.partition("\n")
            blocks.append(
                {
                    "type": "search_result",
                    "source": f"[{source.n}]",
                    "title": title,
                    "content": [{"type": "text", "text": content}],
                    "citations": {"enabled": True},
                }
            )
        rest = self.tail[start + len(joined) :]
        blocks.append({"type": "text", "text": rest})
        return blocks

    def anthropic_citations(self, response: Mapping[str, Any]) -> list[CitedSpan]:
        """The spans an Anthropic answer to `search_result_messages` cites, as sources.

        `response` is the Messages API's response as a dict (``message.model_dump()``, or
        the JSON). Its ``search_result_location`` citations are mapped to ``[n]`` and chunk
        ids by their ``search_result_index``; a citation this prompt did not make possible
        (another location type, an index or ``source`` that is not one of its sources) is an
        `InputError`, never skipped.
        """
        spans: list[CitedSpan] = []
        for index, block in enumerate(response.get("content") or ()):
            for citation in block.get("citations") or ():
                kind = citation.get("type")
                if kind != "search_result_location":
                    raise InputError(
                        f"content[{index}] cites a {kind!r}; this prompt sent its sources as "
                        "search_result blocks only, so only search_result_location can cite them"
                    )
                at = citation.get("search_result_index")
                if not isinstance(at, int) or not 0 <= at < len(self.sources):
                    raise InputError(
                        f"content[{index}] cites search result {at!r}, but the prompt sent "
                        f"{len(self.sources)}: pass the response to the result that built its "
                        "request"
                    )
                source = self.sources[at]
                if citation.get("source") != f"[{source.n}]":
                    raise InputError(
                        f"content[{index}] cites search result {at} as "
                        f"{citation.get('source')!r}, but it was sent as '[{source.n}]': pass the "
                        "response to the result that built its request"
                    )
                spans.append(
                    CitedSpan(
                        n=source.n,
                        id=source.chunk.id,
                        cited_text=str(citation.get("cited_text", "")),
                        answer_block=index,
                    )
                )
        return spans

    def check_citations(self, answer: str) -> CitationCheck:
        """Citations in `answer` that point nowhere, and sources it never cites."""
        return check_citations(answer, len(self.sources))

    @property
    def prefix_text(self) -> str:
        """The cacheable prefix as it stands at the start of `text`."""
        return SECTION_SEPARATOR.join(self.prefix)


def _texts(prompt: SearchResultPrompt) -> list[str]:
    """Every text `prompt` sends, each on its own (how the provider reads the blocks)."""
    texts = [block["text"] for block in prompt.get("system", [])]
    for message in prompt["messages"]:
        for block in message["content"]:
            if block["type"] == "search_result":
                texts += [block["source"], block["title"]]
                texts += [part["text"] for part in block["content"]]
            else:
                texts.append(block["text"])
    return texts


def _user_or_assistant(role: Role, content: str) -> tuple[Literal["user", "assistant"], str]:
    """A history turn under a role every chat API accepts anywhere in a conversation.

    System and tool turns become user text labelled as in the prompt text (``Tool: …``):
    a tool message needs a tool call id the history does not carry, and a system message
    mid-conversation is not accepted everywhere.
    """
    if role in ("user", "assistant"):
        return role, content
    return "user", f"{ROLE_LABELS[role]}: {content}"
