"""The assembled result: chat messages for the OpenAI and Anthropic SDKs, and the report's
fields (core/ctxbudget/_result.py, core/ctxbudget/_report.py).

Provider shapes are checked two ways, with no network: against the SDKs' own request
TypedDicts (made strict: pydantic ignores unknown keys in a TypedDict and validates an
Iterable lazily, so either would let a wrong shape through), and by building the real
request with each SDK's client over a fake transport and reading the JSON it would send.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    CallableTokenizer,
    Chunk,
    CitationCheck,
    ContextAssembler,
    Dropped,
    InputError,
    Report,
    Source,
    SummarySpan,
    Tool,
    TrimmedHistory,
    Turn,
)
from ctxbudget._history import gap_marker
from ctxbudget._inputs import Role
from ctxbudget._result import CONVERSATION_START
from tests.support.factories import chunks
from tests.support.provider_sdks import anthropic_sends, anthropic_valid, openai_sends, openai_valid
from tests.support.tokenizers import fake_count

FAKE = CallableTokenizer(fake_count, name="fake-words")
SYSTEM = "Answer from the sources."
QUESTION = "What changed?"


def budget(*, history_max: int | None = None, total: int = 10_000) -> Budget:
    return Budget(
        total=total,
        allocations=(
            Allocation("system", priority=0),
            Allocation("question", priority=0),
            Allocation("examples", priority=1),
            Allocation("tools", priority=1),
            Allocation("retrieved", max=2_000, priority=2),
            Allocation("history", max=history_max, priority=3),
            Allocation("memory", priority=4),
        ),
    )


def assemble(
    history: list[Turn] | None = None,
    *,
    history_max: int | None = None,
    system: str | None = SYSTEM,
    **inputs: Any,
) -> Assembled:
    assembler = ContextAssembler(tokenizer=FAKE, budget=budget(history_max=history_max))
    return assembler.assemble(system=system, question=QUESTION, history=history or [], **inputs)


def full() -> Assembled:
    """A result with every section: three prefix blocks, history, memory, sources."""
    return assemble(
        [Turn(role="user", content="Hi."), Turn(role="assistant", content="Hello.")],
        examples="Q: x\nA: y [1]",
        tools=[Tool(name="lookup", description="Looks things up.")],
        memory="Prefers short answers.",
        chunks=[Chunk(id="c1", content="Refunds take fourteen days.", score=0.9)],
    )


def with_history(result: Assembled, history: list[tuple[Role, str]]) -> Assembled:
    """`result` with another kept history, to test message shapes the trimmer may produce."""
    return result.model_copy(update={"history": tuple(history)})


def texts(message: Any) -> list[str]:
    content = message["content"]
    return [content] if isinstance(content, str) else [block["text"] for block in content]


# --- the strict check has teeth -----------------------------------------------------------------


def test_strict_openai_check_rejects_cache_control_in_a_text_part() -> None:
    with pytest.raises(ValidationError, match="cache_control\n  Extra inputs are not permitted"):
        openai_valid(full().messages()[:1])


def test_strict_openai_check_rejects_a_tool_turn_without_tool_call_id() -> None:
    generic = with_history(full(), [("tool", "42")]).messages()
    with pytest.raises(ValidationError, match="tool_call_id\n  Field required"):
        openai_valid(generic[1:])


def test_strict_anthropic_check_rejects_an_unknown_request_key() -> None:
    with pytest.raises(ValidationError, match="cache\n  Extra inputs are not permitted"):
        anthropic_valid({"messages": [], "cache": True})


# --- generic style (the default) ----------------------------------------------------------------


def test_messages_default_is_the_generic_style() -> None:
    result = full()
    assert result.messages() == result.messages(style="generic")


def test_generic_messages_mark_the_cache_breakpoint_on_the_last_prefix_block() -> None:
    system = full().messages()[0]
    assert system["role"] == "system"
    assert isinstance(system["content"], list)
    assert [b.get("cache_control") for b in system["content"]] == [
        None,
        None,
        {"type": "ephemeral"},
    ]


def test_generic_messages_keep_history_roles_as_given() -> None:
    result = with_history(full(), [("user", "a"), ("tool", "b"), ("system", "c")])
    assert [m["role"] for m in result.messages()[1:-1]] == ["user", "tool", "system"]


def test_generic_messages_without_a_tail_end_with_the_history() -> None:
    result = with_history(full(), [("user", "a"), ("tool", "42")]).model_copy(update={"tail": ""})
    assert result.messages()[-1] == {"role": "tool", "content": "42"}


def test_generic_messages_without_a_prefix_are_the_tail_alone() -> None:
    result = assemble(system=None)
    assert result.messages() == [{"role": "user", "content": f"Question: {QUESTION}"}]


def test_messages_unknown_style_raises_naming_the_choices() -> None:
    with pytest.raises(
        InputError,
        match="style must be 'generic', 'openai', 'anthropic', 'bedrock' or 'gemini', but got "
        "'cohere'",
    ):
        full().messages(style="cohere")  # type: ignore[call-overload]


# --- OpenAI style -------------------------------------------------------------------------------


def test_openai_messages_start_with_the_prefix_as_one_system_string() -> None:
    result = full()
    assert result.messages(style="openai")[0] == {"role": "system", "content": result.prefix_text}


def test_openai_messages_carry_no_cache_control() -> None:
    assert "cache_control" not in json.dumps(full().messages(style="openai"))


def test_openai_messages_keep_user_and_assistant_turns() -> None:
    messages = full().messages(style="openai")
    assert messages[1:3] == [
        {"role": "user", "content": "Hi."},
        {"role": "assistant", "content": "Hello."},
    ]


def test_openai_messages_label_a_tool_turn_as_user_text() -> None:
    messages = with_history(full(), [("tool", "42")]).messages(style="openai")
    assert messages[1] == {"role": "user", "content": "Tool: 42"}


def test_openai_messages_label_a_mid_history_system_turn_as_user_text() -> None:
    messages = with_history(full(), [("system", "Be terse.")]).messages(style="openai")
    assert messages[1] == {"role": "user", "content": "System: Be terse."}


def test_openai_messages_keep_a_gap_marker_as_a_user_message() -> None:
    history: list[tuple[Role, str]] = [("user", "a"), ("user", gap_marker(3)), ("assistant", "b")]
    messages = with_history(full(), history).messages(style="openai")
    assert messages[2] == {"role": "user", "content": "[… 3 messages omitted …]"}


def test_openai_messages_end_with_the_tail() -> None:
    result = full()
    assert result.messages(style="openai")[-1] == {"role": "user", "content": result.tail}


def test_openai_messages_without_a_prefix_have_no_system_message() -> None:
    messages = assemble([Turn(role="user", content="Hi.")], system=None).messages(style="openai")
    assert [m["role"] for m in messages] == ["user", "user"]


def test_openai_messages_open_with_a_note_when_history_starts_with_the_assistant() -> None:
    result = with_history(full(), [("assistant", "How can I help?"), ("user", "Refunds?")])
    assert result.messages(style="openai")[1] == {"role": "user", "content": CONVERSATION_START}


def test_openai_messages_without_a_tail_end_with_the_history() -> None:
    result = with_history(full(), [("user", "a"), ("tool", "42")]).model_copy(update={"tail": ""})
    assert result.messages(style="openai")[-1] == {"role": "user", "content": "Tool: 42"}


def test_openai_messages_satisfy_the_sdk_request_type() -> None:
    openai_valid(with_history(full(), [("tool", "42"), ("system", "x")]).messages(style="openai"))


def test_openai_sdk_sends_the_messages_unchanged() -> None:
    messages = full().messages(style="openai")
    assert openai_sends(messages)["messages"] == messages


# --- Anthropic style ----------------------------------------------------------------------------


def test_anthropic_system_is_the_prefix_blocks_with_the_breakpoint_on_the_last() -> None:
    result = full()
    system = result.messages(style="anthropic")["system"]
    assert [b["text"] for b in system] == list(result.prefix)
    assert [b.get("cache_control") for b in system] == [None, None, {"type": "ephemeral"}]


def test_anthropic_prompt_without_a_prefix_has_no_system_key() -> None:
    assert "system" not in assemble(system=None).messages(style="anthropic")


def test_anthropic_messages_keep_alternating_turns_one_block_each() -> None:
    messages = full().messages(style="anthropic")["messages"]
    assert [(m["role"], texts(m)) for m in messages[:2]] == [
        ("user", ["Hi."]),
        ("assistant", ["Hello."]),
    ]


def test_anthropic_messages_merge_a_gap_marker_into_the_user_turn_before_it() -> None:
    history: list[tuple[Role, str]] = [("user", "a"), ("user", gap_marker(3)), ("assistant", "b")]
    messages = with_history(full(), history).messages(style="anthropic")["messages"]
    assert texts(messages[0]) == ["a", "[… 3 messages omitted …]"]


def test_anthropic_messages_merge_a_gap_marker_into_the_user_turn_after_it() -> None:
    history: list[tuple[Role, str]] = [
        ("assistant", "a"),
        ("user", gap_marker(2)),
        ("user", "b"),
        ("assistant", "c"),
    ]
    messages = with_history(full(), history).messages(style="anthropic")["messages"]
    assert (messages[2]["role"], texts(messages[2])) == ("user", ["[… 2 messages omitted …]", "b"])


def test_anthropic_messages_merge_a_trailing_user_turn_with_the_tail() -> None:
    result = with_history(full(), [("user", "a"), ("assistant", "b"), ("user", "c")])
    last = result.messages(style="anthropic")["messages"][-1]
    assert (last["role"], texts(last)) == ("user", ["c", result.tail])


def test_anthropic_messages_open_with_a_note_when_history_starts_with_the_assistant() -> None:
    result = with_history(full(), [("assistant", "How can I help?"), ("user", "Refunds?")])
    first = result.messages(style="anthropic")["messages"][0]
    assert (first["role"], texts(first)) == ("user", [CONVERSATION_START])


def test_anthropic_messages_label_tool_and_system_turns_as_user_text() -> None:
    history: list[tuple[Role, str]] = [("system", "Be terse."), ("tool", "42")]
    first = with_history(full(), history).messages(style="anthropic")["messages"][0]
    assert texts(first)[:2] == ["System: Be terse.", "Tool: 42"]


def test_anthropic_messages_leave_out_blank_turns() -> None:
    history: list[tuple[Role, str]] = [("user", "a"), ("assistant", " \n"), ("user", "")]
    result = with_history(full(), history)
    messages = result.messages(style="anthropic")["messages"]
    assert [(m["role"], texts(m)) for m in messages] == [("user", ["a", result.tail])]


def test_anthropic_messages_end_with_the_tail_as_the_last_block() -> None:
    result = full()
    last = result.messages(style="anthropic")["messages"][-1]
    assert texts(last)[-1] == result.tail


def test_anthropic_messages_without_a_tail_end_with_the_history() -> None:
    result = with_history(full(), [("user", "a"), ("assistant", "b"), ("tool", "42")])
    last = result.model_copy(update={"tail": ""}).messages(style="anthropic")["messages"][-1]
    assert (last["role"], texts(last)) == ("user", ["Tool: 42"])


def test_anthropic_messages_tail_after_a_tool_result_joins_its_user_message() -> None:
    result = with_history(full(), [("user", "a"), ("assistant", "b"), ("tool", "42")])
    last = result.messages(style="anthropic")["messages"][-1]
    assert (last["role"], texts(last)) == ("user", ["Tool: 42", result.tail])


def test_anthropic_prompt_satisfies_the_sdk_request_type() -> None:
    history: list[tuple[Role, str]] = [("assistant", "x"), ("tool", "42"), ("user", gap_marker(2))]
    anthropic_valid(with_history(full(), history).messages(style="anthropic"))


def test_anthropic_sdk_sends_system_and_messages_unchanged() -> None:
    prompt = full().messages(style="anthropic")
    body = anthropic_sends(prompt)
    assert (body["system"], body["messages"]) == (prompt["system"], prompt["messages"])


def test_anthropic_sdk_sends_no_system_when_there_is_no_prefix() -> None:
    assert "system" not in anthropic_sends(assemble(system=None).messages(style="anthropic"))


# --- every style: same prompt, same bytes -------------------------------------------------------


@pytest.mark.parametrize("style", ["generic", "openai", "anthropic"])
def test_messages_are_byte_identical_across_assemblies(style: Any) -> None:
    assert json.dumps(full().messages(style=style)) == json.dumps(full().messages(style=style))


def test_provider_message_texts_all_appear_in_the_prompt_text() -> None:
    # The labels (Tool:, System:) are the ones the text's conversation section uses.
    result = assemble(
        [
            Turn(role="assistant", content="How can I help?"),
            Turn(role="tool", content="42"),
            Turn(role="system", content="Be terse."),
            Turn(role="user", content="Refunds?"),
        ]
    )
    openai_texts = [t for m in result.messages(style="openai") for t in texts(m)]
    prompt = result.messages(style="anthropic")
    anthropic_texts = [t for m in prompt["messages"] for t in texts(m)]
    anthropic_texts += [b["text"] for b in prompt["system"]]
    for text in openai_texts + anthropic_texts:
        assert text == CONVERSATION_START or text in result.text


# --- any history the trimmer can keep -----------------------------------------------------------

HISTORY = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "system", "tool"]),
        st.sampled_from(["a", "b c", "", " ", "\n", gap_marker(1), gap_marker(7)]),
    ),
    max_size=12,
)
BASES = {"prefix": full(), "no prefix": assemble(system=None)}


def mapped(role: Role, content: str) -> tuple[str, str]:
    return (
        (role, content) if role in ("user", "assistant") else ("user", f"{role.title()}: {content}")
    )


def without_tail(result: Assembled, drop: bool) -> Assembled:
    """`result` with no tail when `drop`: ``assemble(question=None)`` with no memory or sources."""
    return result.model_copy(update={"tail": ""}) if drop else result


@given(history=HISTORY, base=st.sampled_from(sorted(BASES)), no_tail=st.booleans())
def test_anthropic_messages_alternate_from_user_for_any_history(
    history: list[tuple[Role, str]], base: str, no_tail: bool
) -> None:
    result = without_tail(with_history(BASES[base], history), no_tail)
    prompt = result.messages(style="anthropic")
    messages = prompt["messages"]
    roles = [m["role"] for m in messages]
    kept = [(role, text) for role, text in (mapped(r, c) for r, c in history) if text.strip()]
    if no_tail and not kept:
        assert messages == []
        return
    assert roles[0] == "user"
    assert roles[-1] == ("user" if result.tail or kept[-1][0] == "user" else "assistant")
    assert all(a != b for a, b in itertools.pairwise(roles))
    opening = [CONVERSATION_START] if kept and kept[0][0] == "assistant" else []
    blocks = [t for m in messages for t in texts(m)]
    assert blocks == [
        *opening,
        *(text for _, text in kept),
        *([result.tail] if result.tail else []),
    ]
    assert ("system" in prompt) == bool(result.prefix)
    anthropic_valid(prompt)


@given(history=HISTORY, base=st.sampled_from(sorted(BASES)), no_tail=st.booleans())
def test_openai_messages_are_valid_for_any_history(
    history: list[tuple[Role, str]], base: str, no_tail: bool
) -> None:
    result = without_tail(with_history(BASES[base], history), no_tail)
    messages = result.messages(style="openai")
    system = [{"role": "system", "content": result.prefix_text}] if result.prefix else []
    turns = [{"role": role, "content": text} for role, text in (mapped(r, c) for r, c in history)]
    opening = (
        [{"role": "user", "content": CONVERSATION_START}]
        if turns[:1] and (turns[0]["role"] == "assistant")
        else []
    )
    tail = [{"role": "user", "content": result.tail}] if result.tail else []
    assert messages == [*system, *opening, *turns, *tail]
    openai_valid(messages)


@given(
    roles=st.lists(st.sampled_from(["user", "assistant", "system", "tool"]), max_size=14),
    history_max=st.integers(20, 120),
)
def test_trimmed_history_gives_alternating_anthropic_messages(
    roles: list[Role], history_max: int
) -> None:
    turns = [Turn(role=role, content=f"turn {i} " + "w " * (i % 5)) for i, role in enumerate(roles)]
    result = assemble(turns, history_max=history_max)
    roles_out = [m["role"] for m in result.messages(style="anthropic")["messages"]]
    assert roles_out[0] == roles_out[-1] == "user"
    assert all(a != b for a, b in itertools.pairwise(roles_out))
    anthropic_valid(result.messages(style="anthropic"))
    openai_valid(result.messages(style="openai"))


# --- report and result fields -------------------------------------------------------------------

MODELS: list[type[BaseModel]] = [
    Assembled,
    Source,
    Report,
    Dropped,
    CitationCheck,
    SummarySpan,
    TrimmedHistory,
]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_public_field_has_a_description(model: type[BaseModel]) -> None:
    assert [name for name, field in model.model_fields.items() if not field.description] == []


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_json_schema_describes_every_field(model: type[BaseModel]) -> None:
    properties = model.model_json_schema()["properties"]
    assert [name for name, schema in properties.items() if "description" not in schema] == []


def test_report_describes_every_drop_reason() -> None:
    description = Dropped.model_fields["reason"].description or ""
    reasons = get_args(Dropped.model_fields["reason"].annotation)
    assert [r for r in reasons if f"{r} (" not in description] == []


def test_report_grants_can_sum_past_the_budget() -> None:
    # Retrieval is granted up to its max but uses a third; what it leaves flows on, so
    # history is granted up to its max too: two ceilings, one budget.
    report = (
        ContextAssembler(
            tokenizer=FAKE,
            budget=Budget(
                total=1_000,
                allocations=(
                    Allocation("question", priority=0),
                    Allocation("retrieved", max=700, priority=1),
                    Allocation("history", max=700, priority=2),
                ),
            ),
        )
        .assemble(
            question=QUESTION,
            chunks=chunks(2),
            history=[Turn(role="user", content="w " * 30) for _ in range(3)],
        )
        .report
    )
    assert report.granted["retrieved"] == report.granted["history"] == 700
    assert sum(report.granted.values()) > report.budget >= sum(report.sizes.values())


def test_report_sizes_stay_within_grants() -> None:
    report = assemble(chunks=chunks(60), history_max=50).report
    assert [n for n, size in report.sizes.items() if size > report.granted[n]] == []


def test_report_drops_past_the_first_that_did_not_fit_are_uncounted() -> None:
    report = assemble(chunks=chunks(60)).report
    over = [d for d in report.dropped if d.reason == "over_budget"]
    assert len(over) > 10
    assert {d.tokens for d in over[1:]} == {None}


def test_dropped_unvalidated_equals_the_validated_record() -> None:
    built = Dropped._unvalidated("retrieved", "chunk", "c1", "duplicate")
    assert built == Dropped(claimant="retrieved", kind="chunk", id="c1", reason="duplicate")
