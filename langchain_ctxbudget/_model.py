"""What a LangChain chat model says about its budget: its tokenizer (by its model name) and
its context window (``profile["max_input_tokens"]``).

One rule for every component that takes a chat model: `ContextBudgetRunnable.for_model`,
`ContextBudgetMiddleware.for_model`, and `trim_history` given a chat model as its tokenizer.
"""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from ctxbudget import Budget, BudgetError, Tokenizer, TokenizerError, get_tokenizer

__all__ = ["model_budget", "model_name", "model_tokenizer"]


def model_name(chat_model: BaseChatModel) -> str | None:
    """The model a chat model names (``model_name``, else ``model``), or None."""
    for attribute in ("model_name", "model"):
        value = getattr(chat_model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


def model_tokenizer(chat_model: BaseChatModel, *, where: str) -> Tokenizer:
    """The tokenizer of the model `chat_model` names (`ctxbudget.get_tokenizer`); a
    `TokenizerError` saying to pass ``tokenizer=...`` to `where` when it names none or one
    tiktoken does not know."""
    name = model_name(chat_model)
    if name is None:
        raise TokenizerError(
            f"{type(chat_model).__name__} names no model (model_name or model), so its "
            f"tokenizer is unknown; pass tokenizer=... to {where} (a tiktoken model or "
            "encoding name, or a Tokenizer)"
        )
    try:
        return get_tokenizer(name)
    except TokenizerError as error:
        raise TokenizerError(
            f"{error}; pass tokenizer=... to {where} (a HuggingFaceTokenizer or "
            "CallableTokenizer for models tiktoken does not know)"
        ) from None


def model_budget(chat_model: BaseChatModel, *, reserve_output: int, where: str) -> Budget:
    """`Budget.for_context_window` of the model's ``profile["max_input_tokens"]``."""
    window = (chat_model.profile or {}).get("max_input_tokens")
    if not isinstance(window, int):
        raise BudgetError(
            f"{type(chat_model).__name__} has no profile['max_input_tokens'], so its "
            "context window is unknown; pass profile={'max_input_tokens': ...} to the chat "
            f"model, or build {where} from a ContextAssembler(budget="
            "Budget.for_context_window(<tokens>, reserve_output=...), tokenizer=...)"
        )
    return Budget.for_context_window(window, reserve_output=reserve_output)
