"""The provider's own count as the final check: one call on the whole finished request.

Claude and Gemini publish no tokenizer; their exact count is a network call. Made once per
assembly on the finished system, messages and tools (never per chunk, which would pay a
message frame per chunk and a call per text), in the request shape `Assembled.messages`
builds for that SDK (docs/tokenizers.md, "The provider's own count as the final check").
The SDKs are imported only when a
count is made: `import ctxbudget` loads none of them.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxbudget._allocate import Allocated
from ctxbudget._errors import CtxBudgetError
from ctxbudget._estimates import ESTIMATES
from ctxbudget._exact import Rendered, recount
from ctxbudget._tokens import CountCache, CountMethod, count_method_of, get_tokenizer
from ctxbudget._tools import tool_schema

if TYPE_CHECKING:
    from ctxbudget._result import Assembled

__all__ = [
    "AnthropicCount",
    "BedrockCount",
    "FinalCount",
    "GeminiCount",
    "ProviderCount",
    "ProviderCountError",
    "count_with_provider",
    "provider_figure",
]

logger = logging.getLogger("ctxbudget")


class ProviderCountError(CtxBudgetError):
    """A provider count call failed; the assembler falls back to its offline count.

    Raise it from a `ProviderCount` of your own for the same fallback.
    """


@runtime_checkable
class ProviderCount(Protocol):
    """Counts a finished prompt with the provider's API: one call per count."""

    @property
    def label(self) -> str:
        """How the count is made, for `report.count_method`, e.g. ``anthropic count_tokens``."""
        ...

    @property
    def exact(self) -> bool:
        """True when the provider counts the whole request; False when part of it is
        budgeted with an offline estimate (`report.count_exact`)."""
        ...

    def count(self, prompt: Assembled) -> int:
        """The provider's input-token count of `prompt` as it would be sent, raising
        `ProviderCountError` when the call fails."""
        ...


def provider_figure(provider: ProviderCount, prompt: Assembled) -> int:
    """`provider.count(prompt)`, checked: a count that is not a non-negative int is a bug
    in the counter, not a figure to budget with."""
    figure = provider.count(prompt)
    if not isinstance(figure, int) or isinstance(figure, bool) or figure < 0:
        raise TypeError(
            f"{provider.label} returned {figure!r}; a ProviderCount must return the prompt's "
            "token count as a non-negative int"
        )
    return figure


def _sdk(module: str, extra: str) -> Any:
    """An SDK module, imported when the first count is made."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{module} is needed for this provider count; pip install 'ctxbudget[{extra}]'"
        ) from exc


def _failed(label: str, exc: BaseException) -> ProviderCountError:
    return ProviderCountError(f"{label} failed: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class AnthropicCount:
    """Anthropic's ``messages.count_tokens`` on the finished system, messages and tools.

    `client` is an ``anthropic.Anthropic`` (or ``AnthropicVertex``); Bedrock's Anthropic
    client cannot count tokens, so use `BedrockCount` there. Anthropic calls its count an
    estimate that "may differ by a small amount" from what a message is billed.
    """

    client: Any
    model: str
    label: str = "anthropic count_tokens"
    exact: bool = True

    def count(self, prompt: Assembled) -> int:
        anthropic = _sdk("anthropic", "anthropic")
        request: dict[str, Any] = dict(prompt.messages(style="anthropic"))
        if prompt.report.tool_schema_tokens:
            request["tools"] = prompt.tool_schemas(style="anthropic")
        try:
            counted = self.client.messages.count_tokens(model=self.model, **request)
        except anthropic.APIError as exc:
            raise _failed(self.label, exc) from exc
        return int(counted.input_tokens)


@dataclass(frozen=True)
class BedrockCount:
    """Bedrock's ``CountTokens`` on the finished request in the Converse shape.

    `client` is a boto3 ``bedrock-runtime`` client; `model_id` the model or inference
    profile id, e.g. ``anthropic.claude-sonnet-4-5-20250929-v1:0``.
    """

    client: Any
    model_id: str
    label: str = "bedrock count_tokens"
    exact: bool = True

    def count(self, prompt: Assembled) -> int:
        exceptions = _sdk("botocore.exceptions", "bedrock")
        converse: dict[str, Any] = dict(prompt.messages(style="bedrock"))
        if prompt.report.tool_schema_tokens:
            converse["toolConfig"] = {"tools": prompt.tool_schemas(style="bedrock")}
        try:
            counted = self.client.count_tokens(modelId=self.model_id, input={"converse": converse})
        except (exceptions.BotoCoreError, exceptions.ClientError) as exc:
            raise _failed(self.label, exc) from exc
        return int(counted["inputTokens"])


@dataclass(frozen=True)
class GeminiCount:
    """google-genai's ``models.count_tokens`` on the finished request.

    `client` is a ``google.genai.Client``. On Vertex AI (``Client(vertexai=True, ...)``)
    the system instruction and tools are counted with the contents. The Gemini Developer
    API counts only the contents, so there the system instruction and tool schemas are
    counted offline with ``estimate:gemini``, an upper bound with its margin, and the
    figure is not exact (docs/tokenizers.md, "The provider's own count as the final check").
    """

    client: Any
    model: str

    @property
    def vertex(self) -> bool:
        """Whether the client calls Vertex AI, which counts the whole request."""
        return bool(self.client.vertexai)

    @property
    def label(self) -> str:
        if self.vertex:
            return "gemini count_tokens"
        return "gemini count_tokens (contents) + estimate:gemini (system, tools)"

    @property
    def exact(self) -> bool:
        return self.vertex

    @property
    def margin(self) -> float | None:
        """The estimate's margin where part of the request is estimated."""
        return None if self.vertex else ESTIMATES["estimate:gemini"].margin

    def count(self, prompt: Assembled) -> int:
        errors = _sdk("google.genai.errors", "gemini")
        auth = _sdk("google.auth.exceptions", "gemini")
        httpx = _sdk("httpx", "gemini")
        shaped = prompt.messages(style="gemini")
        config: dict[str, Any] = {}
        rest = 0
        tools = prompt.tool_schemas(style="gemini") if prompt.report.tool_schema_tokens else []
        if self.vertex:
            config.update(shaped.get("config", {}))
            if tools:
                config["tools"] = [{"function_declarations": tools}]
        else:
            rest = _estimate_rest(prompt)
        try:
            counted = self.client.models.count_tokens(
                model=self.model, contents=shaped["contents"], config=config or None
            )
        except (errors.APIError, auth.GoogleAuthError, httpx.HTTPError) as exc:
            raise _failed(self.label, exc) from exc
        return int(counted.total_tokens or 0) + rest


def _estimate_rest(prompt: Assembled) -> int:
    """The Gemini estimate of what the Developer API cannot count: the system instruction
    and the native tool schemas."""
    estimate = get_tokenizer("estimate:gemini")
    texts = [prompt.prefix_text] if prompt.prefix else []
    if prompt.report.tool_schema_tokens:
        texts += [tool_schema(tool) for tool in prompt.tools]
    return sum(estimate.count(text) for text in texts)


@dataclass(frozen=True)
class FinalCount:
    """What the report says of the final check: its figure, how it was made, and, when the
    provider's call failed, why the offline count stands."""

    total: int
    method: CountMethod
    fallback: str | None = None


def count_with_provider(
    provider: ProviderCount,
    rendered: Rendered,
    allocated: Allocated,
    limit: int,
    counter: CountCache,
    build: Callable[[Rendered], Assembled],
) -> tuple[Rendered, FinalCount]:
    """Recount `rendered` (within `limit` by the offline count) with `provider`, trimming
    as `render_exactly` does while the provider's figure is over; on a failed call, the
    prompt as it stands then, with its offline count (an upper bound) and the reason."""
    current = rendered

    def measure(candidate: Rendered) -> int:
        nonlocal current
        current = candidate
        return provider_figure(provider, build(candidate))

    try:
        rendered, figure = recount(
            rendered, allocated, limit, counter, measure, what=f"the {provider.label} count"
        )
    except ProviderCountError as exc:
        logger.warning(
            "%s; the offline count (%s tokens) stands",
            exc,
            f"{current.total:,}",
            extra={"ctxbudget_count_fallback": str(exc)},
        )
        return current, FinalCount(
            current.total, count_method_of(counter.tokenizer), fallback=str(exc)
        )
    margin = getattr(provider, "margin", None)
    method = CountMethod(
        provider.label, exact=provider.exact, margin=margin if isinstance(margin, float) else None
    )
    return rendered, FinalCount(figure, method)
