"""What a LangChain chat model says about its budget: its tokenizer and its context window,
read from its model name by the core's one model-name rule (`ctxbudget.resolve_model`) and
from its ``profile``.

One rule for every component that takes a chat model: `ContextBudgetRunnable.for_model`,
`ContextBudgetMiddleware.for_model`, and `trim_history` given a chat model as its tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.language_models import BaseChatModel

from ctxbudget import (
    Budget,
    InvalidBudgetError,
    Tokenizer,
    TokenizerError,
    get_tokenizer,
    resolve_model,
)

__all__ = ["model_budget", "model_name", "model_tokenizer"]

_NAME_ATTRIBUTES = ("model_name", "model", "model_id")
"""Where chat models keep the model they call: ``model_name`` (ChatOpenAI), ``model``
(ChatAnthropic, ChatOllama, ChatGoogleGenerativeAI), ``model_id`` (ChatBedrockConverse)."""


def model_name(chat_model: BaseChatModel) -> str | None:
    """The model a chat model names, or None."""
    for attribute in _NAME_ATTRIBUTES:
        value = getattr(chat_model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def model_tokenizer(chat_model: BaseChatModel, *, where: str) -> Tokenizer:
    """The tokenizer of the model `chat_model` names (`ctxbudget.get_tokenizer`, which reads
    provider prefixes, Bedrock ids, Ollama tags and the like); a `TokenizerError` saying to
    pass ``tokenizer=...`` to `where` when it names none or one ctxbudget cannot count."""
    name = model_name(chat_model)
    if name is None:
        raise TokenizerError(
            f"{type(chat_model).__name__} names no model ({', '.join(_NAME_ATTRIBUTES)}), so "
            f"its tokenizer is unknown; pass tokenizer=... to {where} (a model or encoding "
            "name, or a Tokenizer)"
        )
    try:
        return get_tokenizer(name)
    except TokenizerError as error:
        raise TokenizerError(f"{error}; or pass tokenizer=... to {where}") from None


def _num_ctx(chat_model: BaseChatModel) -> object:
    """The context window an Ollama chat model asks its server for (``num_ctx``), if set."""
    return getattr(chat_model, "num_ctx", None)


def model_budget(
    chat_model: BaseChatModel,
    *,
    reserve_output: int,
    where: str,
    layout: Callable[..., Budget] = Budget.for_context_window,
) -> Budget:
    """`layout` (`Budget.for_context_window`, or `Budget.for_agent` for an agent's calls) of
    the model's window: its ``profile["max_input_tokens"]``, else the window its server was
    set to (``num_ctx``, as ChatOllama holds it), else the window `resolve_model` knows for
    its name; a `InvalidBudgetError` saying what to pass when none is known."""
    for window in ((chat_model.profile or {}).get("max_input_tokens"), _num_ctx(chat_model)):
        if isinstance(window, int) and not isinstance(window, bool) and window > 0:
            return layout(window, reserve_output=reserve_output)
    name = model_name(chat_model)
    if name is not None:
        try:
            window = resolve_model(name).context_window
        except TokenizerError:
            window = None
        if window is not None:
            return layout(window, reserve_output=reserve_output)
    raise InvalidBudgetError(
        f"{type(chat_model).__name__} has no profile['max_input_tokens'] or num_ctx, and its model "
        f"({name!r}) has no window ctxbudget knows (an Ollama or vLLM model's is its "
        "server's setting), so its context window is unknown; pass "
        "profile={'max_input_tokens': ...} (or num_ctx=... to ChatOllama) to the chat model, "
        "or build "
        f"{where} from a ContextAssembler(budget="
        "Budget.for_context_window(<tokens>, reserve_output=...), tokenizer=...)"
    )
