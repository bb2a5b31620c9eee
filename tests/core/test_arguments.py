"""The one argument check: every public entry point refuses a wrong type alike."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    Budget,
    ContextAssembler,
    CtxBudgetError,
    InputError,
    Turn,
    get_tokenizer,
    select_sources,
    tokenizer_from_file,
    trim_history,
)
from ctxbudget._arguments import ArgumentTypeError
from tests.support.factories import chunks

CHUNKS = chunks(2)
TURNS = [Turn(role="user", content="Where is my order?")]


def assembler() -> ContextAssembler:
    return ContextAssembler(tokenizer="o200k_base")


# Each entry point with one argument replaced: (parameter, what it takes, the call, None ok).
ENTRY_POINTS: dict[str, tuple[str, str, Callable[[object], object], bool]] = {
    "ContextAssembler(tokenizer=)": (
        "tokenizer",
        "a model/encoding name or a Tokenizer",
        lambda v: ContextAssembler(tokenizer=v),  # type: ignore[arg-type]
        False,
    ),
    "ContextAssembler(budget=)": (
        "budget",
        "a Budget",
        lambda v: ContextAssembler(tokenizer="o200k_base", budget=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler(sources=)": (
        "sources",
        "a SourceOptions",
        lambda v: ContextAssembler(tokenizer="o200k_base", sources=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler(history=)": (
        "history",
        "a HistoryOptions",
        lambda v: ContextAssembler(tokenizer="o200k_base", history=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler(provider_count=)": (
        "provider_count",
        "a ProviderCount",
        lambda v: ContextAssembler(tokenizer="o200k_base", provider_count=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler(fence_rule=)": (
        "fence_rule",
        "a bool",
        lambda v: ContextAssembler(tokenizer="o200k_base", fence_rule=v),  # type: ignore[arg-type]
        False,
    ),
    "ContextAssembler(cache_size=)": (
        "cache_size",
        "an int",
        lambda v: ContextAssembler(tokenizer="o200k_base", cache_size=v),  # type: ignore[arg-type]
        False,
    ),
    "assemble(now=)": (
        "now",
        "a datetime",
        lambda v: assembler().assemble(question="Why?", chunks=CHUNKS, now=v),  # type: ignore[arg-type]
        True,
    ),
    "assemble(system=)": (
        "system",
        "a str or None",
        lambda v: assembler().assemble(question="Why?", system=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler.select_sources(max_tokens=)": (
        "max_tokens",
        "an int",
        lambda v: assembler().select_sources(CHUNKS, max_tokens=v),  # type: ignore[arg-type]
        True,
    ),
    "ContextAssembler.trim_history(min_tokens=)": (
        "min_tokens",
        "an int",
        lambda v: assembler().trim_history(TURNS, min_tokens=v),  # type: ignore[arg-type]
        True,
    ),
    "select_sources(tokenizer=)": (
        "tokenizer",
        "a model/encoding name or a Tokenizer",
        lambda v: select_sources(CHUNKS, max_tokens=500, tokenizer=v),  # type: ignore[arg-type]
        False,
    ),
    "select_sources(sources=)": (
        "sources",
        "a SourceOptions",
        lambda v: select_sources(CHUNKS, max_tokens=500, tokenizer="o200k_base", sources=v),  # type: ignore[arg-type]
        True,
    ),
    "select_sources(max_tokens=)": (
        "max_tokens",
        "an int",
        lambda v: select_sources(CHUNKS, max_tokens=v, tokenizer="o200k_base"),  # type: ignore[arg-type]
        False,
    ),
    "trim_history(tokenizer=)": (
        "tokenizer",
        "a model/encoding name or a Tokenizer",
        lambda v: trim_history(TURNS, max_tokens=500, tokenizer=v),  # type: ignore[arg-type]
        False,
    ),
    "trim_history(history=)": (
        "history",
        "a HistoryOptions",
        lambda v: trim_history(TURNS, max_tokens=500, tokenizer="o200k_base", history=v),  # type: ignore[arg-type]
        True,
    ),
    "trim_history(min_tokens=)": (
        "min_tokens",
        "an int",
        lambda v: trim_history(TURNS, max_tokens=500, tokenizer="o200k_base", min_tokens=v),  # type: ignore[arg-type]
        False,
    ),
    "Budget.for_model(model)": (
        "model",
        "a model name",
        lambda v: Budget.for_model(v, reserve_output=500),  # type: ignore[arg-type]
        False,
    ),
    "Budget.for_model(reserve_output=)": (
        "reserve_output",
        "an int",
        lambda v: Budget.for_model("gpt-4o", reserve_output=v),  # type: ignore[arg-type]
        False,
    ),
    "Budget.for_agent(window)": (
        "window",
        "an int",
        lambda v: Budget.for_agent(v, reserve_output=500),  # type: ignore[arg-type]
        False,
    ),
    "Budget.for_context_window(reserve_output=)": (
        "reserve_output",
        "an int",
        lambda v: Budget.for_context_window(8_000, reserve_output=v),  # type: ignore[arg-type]
        False,
    ),
    "get_tokenizer()": (
        "model_or_encoding",
        "a model or tiktoken encoding name",
        lambda v: get_tokenizer(v),  # type: ignore[call-overload]
        False,
    ),
    "tokenizer_from_file(path)": (
        "path",
        "a str or os.PathLike",
        lambda v: tokenizer_from_file(v),  # type: ignore[arg-type]
        False,
    ),
    "tokenizer_from_file(sha256=)": (
        "sha256",
        "a str",
        lambda v: tokenizer_from_file("vocab.tiktoken", sha256=v),  # type: ignore[arg-type]
        True,
    ),
}

# Wrong for every parameter above; their text ("user secret") must never reach a message.
WRONG = [3.5, {"user": "user secret"}, b"user secret", ["user secret"]]
CASES = [
    pytest.param(entry, value, id=f"{entry}-{type(value).__name__}")
    for entry in ENTRY_POINTS
    for value in [*WRONG, *([] if ENTRY_POINTS[entry][3] else [None])]
]


@pytest.mark.parametrize(("entry", "value"), CASES)
def test_entry_point_refuses_a_wrong_type_naming_parameter_type_and_fix(
    entry: str, value: object
) -> None:
    name, takes, call, _ = ENTRY_POINTS[entry]
    got = type(value).__name__
    with pytest.raises(ArgumentTypeError, match=rf"^{name} must be {takes}.*, not {got}\b") as e:
        call(value)
    assert "user secret" not in str(e.value)


def test_argument_type_error_is_a_type_error_and_an_input_error() -> None:
    with pytest.raises(TypeError) as caught:
        ContextAssembler(tokenizer="o200k_base", budget={"total": 100})  # type: ignore[arg-type]

    assert isinstance(caught.value, InputError)


def test_budget_as_a_dict_names_the_constructors() -> None:
    with pytest.raises(
        TypeError,
        match=r"^budget must be a Budget, not dict; build it with Budget\(total=\.\.\., "
        r"allocations=\[\.\.\.\]\), Budget\.for_model\(\.\.\.\) or Budget\.parse\(\{\.\.\.\}\)$",
    ):
        ContextAssembler(tokenizer="o200k_base", budget={"total": 100})  # type: ignore[arg-type]


def test_a_bool_is_refused_as_a_number_of_tokens() -> None:
    with pytest.raises(ArgumentTypeError, match=r"^max_tokens must be an int, not bool$"):
        select_sources(CHUNKS, max_tokens=True, tokenizer="o200k_base")


def test_argument_type_error_survives_pickling() -> None:
    with pytest.raises(ArgumentTypeError) as caught:
        get_tokenizer(42)  # type: ignore[call-overload]

    copy = pickle.loads(pickle.dumps(caught.value))

    assert (type(copy), str(copy)) == (ArgumentTypeError, str(caught.value))


ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "gpt-4o", "o200k_base"]),
    st.binary(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.builds(object),
)


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
@given(value=ANY_VALUE)
def test_entry_point_raises_only_its_own_errors_on_any_value(entry: str, value: object) -> None:
    # Anything but ctxbudget's own errors (an AttributeError, a KeyError) fails the test.
    with contextlib.suppress(CtxBudgetError):
        ENTRY_POINTS[entry][2](value)
