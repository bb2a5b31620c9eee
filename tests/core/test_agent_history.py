"""Agent histories end to end: tool calls in units, the latest unit always sent, no question
(core/ctxbudget/_history.py, _assemble.py, _result.py).

The property draws random agent conversations (user turns, assistant turns with 0-3 tool
calls each answered by tool turns in one group, system turns anywhere, random sizes, random
budgets and clearing options) and checks `trim_history`, `ContextAssembler.trim_history` and
`ContextAssembler.assemble(question=None)` against rules written here from docs/agents.md,
"Agents and chat": within budget by an exact count, the latest unit sent or a justified
error naming it, units whole, every gap marker's count exact, the first unit kept when it
fits, old results cleared before any unit goes, and the chat messages a valid OpenAI and
Anthropic request (by an independent check and by the SDKs' own request types).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from ctxbudget import (
    Allocation,
    Assembled,
    Budget,
    Chunk,
    ContextAssembler,
    ContextBudgetError,
    HistoryOptions,
    InputError,
    TrimmedHistory,
    Turn,
    get_tokenizer,
    trim_history,
)
from ctxbudget._result import CONVERSATION_START
from tests.support.factories import budget_for
from tests.support.provider_sdks import anthropic_valid, openai_valid

O200K = get_tokenizer("o200k_base")
LABELS = {"system": "System", "user": "User", "assistant": "Assistant", "tool": "Tool"}
TOOLS = ("search", "lookup", "fetch")


def words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


# --- random agent conversations ---------------------------------------------------------------


@st.composite
def agent_histories(draw: st.DrawFn) -> list[Turn]:
    """Rounds of: maybe a system turn, a user turn, then assistant turns with 0-3 tool calls
    (a call with its results is one group); the history ends with a user turn or with the
    last calls' results (an agent about to answer them)."""
    turns: list[Turn] = []
    size = st.integers(0, 40)
    for r in range(draw(st.integers(1, 6))):
        if draw(st.integers(0, 9)) == 0:
            turns.append(Turn(role="system", content=f"rule{r} " + words(draw(size), "s")))
        turns.append(Turn(role="user", content=f"ask{r} " + words(draw(size), f"u{r}x")))
        for c in range(draw(st.integers(0, 2))):
            calls = draw(st.integers(0, 3))
            group = f"g{r}-{c}" if calls else None
            said = f"step{r}-{c} " + words(draw(size), f"a{r}{c}x")
            turns.append(Turn(role="assistant", content=said, group=group))
            for k in range(calls):
                result = words(draw(st.integers(0, 150)), f"t{r}{c}{k}x")
                name = draw(st.sampled_from(TOOLS))
                turns.append(Turn(role="tool", content=result, group=group, name=name))
            if draw(st.integers(0, 9)) == 0:
                turns.append(Turn(role="system", content=f"note{r}{c}"))
    if turns[-1].role == "assistant" or draw(st.booleans()):
        turns.append(Turn(role="user", content="last " + words(draw(size), "z")))
    return turns


def summary(turns: Sequence[Turn]) -> str:
    return f"the user asked {len(turns)} things"


def no_summary(turns: Sequence[Turn]) -> None:
    return None


history_options = st.builds(
    HistoryOptions,
    clear_tool_results=st.booleans(),
    keep_tool_results=st.integers(0, 3),
    clear_at_least=st.sampled_from([0, 0, 50, 400]),
    never_clear=st.sets(st.sampled_from(TOOLS), max_size=2).map(frozenset),
    summarize=st.sampled_from([None, None, summary, no_summary]),
    summary_tokens=st.sampled_from([8, 40]),
)


def gap_room(options: HistoryOptions) -> int:
    """What a gap may cost beyond a marker: the space reserved for a summary."""
    return 0 if options.summarize is None else options.summary_tokens + 12


# --- the rules, written here ------------------------------------------------------------------


def units(turns: Sequence[Turn]) -> list[list[int]]:
    """Indices in units: consecutive turns of one group together."""
    out: list[list[int]] = []
    for index, turn in enumerate(turns):
        if turn.group is not None and index and turns[index - 1].group == turn.group:
            out[-1].append(index)
        else:
            out.append([index])
    return out


def line(turn: Turn, content: str | None = None) -> str:
    return f"{LABELS[turn.role]}: {turn.content if content is None else content}"


def placeholder(turn: Turn) -> str:
    before = O200K.count(line(turn))
    name = "" if turn.name is None else f"{turn.name}, "
    return f"[tool result cleared: {name}{before:,} tokens]"


def section(lines: Sequence[str]) -> str:
    return "<conversation>\n" + "\n\n".join(lines) + "\n</conversation>"


def cheapest(
    turns: Sequence[Turn], unit: list[int], options: HistoryOptions, latest: bool
) -> list[str]:
    """A unit's lines at their cheapest: a tool result that may be cleared, cleared."""
    out = []
    for index in unit:
        turn = turns[index]
        whole = line(turn)
        clearable = (
            options.clear_tool_results
            and turn.role == "tool"
            and not latest
            and turn.name not in options.never_clear
        )
        cleared = line(turn, placeholder(turn))
        out.append(cleared if clearable and O200K.count(cleared) < O200K.count(whole) else whole)
    return out


SLACK = 16
"""Tokens an estimate may be off from an exact count here: a marker for the longest gap is
priced, joins merge or split a token each."""


@dataclass
class Kept:
    """What a trimmed history sent, read back from its messages alone."""

    turns: list[int]
    markers: list[tuple[int, int]]
    """(missing turns the marker says, missing turns there in fact)."""
    contents: dict[int, str]


def read_back(turns: Sequence[Turn], messages: Sequence[tuple[str, str]]) -> Kept:
    """Each message matched to the input turn it is (by content or placeholder), in order."""
    kept: list[int] = []
    markers: list[tuple[int, int]] = []
    contents: dict[int, str] = {}
    position = 0
    pending: int | None = None
    for role, content in messages:
        marker = content.startswith("[… ") and content.endswith(" omitted …]")
        if role == "user" and (marker or content.startswith("[Summary of ")):
            pending = int(content.split(" ")[1 if marker else 2])
            continue
        found = next(
            i
            for i in range(position, len(turns))
            if turns[i].role == role and content in (turns[i].content, placeholder(turns[i]))
        )
        if pending is not None:
            markers.append((pending, found - position))
            pending = None
        else:
            assert found == position, f"turns {position}..{found - 1} left out with no marker"
        kept.append(found)
        contents[found] = content
        position = found + 1
    assert pending is None, "a gap marker at the end: the latest turn is missing"
    return Kept(kept, markers, contents)


def check_trimmed(
    turns: list[Turn], trimmed: TrimmedHistory, max_tokens: int, options: HistoryOptions
) -> None:
    # Within budget, counted exactly.
    assert O200K.count(trimmed.text) == trimmed.tokens <= max_tokens
    kept = read_back(turns, trimmed.messages)
    assert kept.turns == list(trimmed.kept)
    # Every marker counts the messages it stands for.
    assert all(said == missing for said, missing in kept.markers)
    assert sum(missing for _, missing in kept.markers) == len(turns) - len(kept.turns)
    # The latest unit is sent, whole; every unit is kept whole or left out whole.
    grouped = units(turns)
    assert set(grouped[-1]) <= set(kept.turns)
    for unit in grouped:
        assert set(unit) <= set(kept.turns) or not set(unit) & set(kept.turns)
    # No tool result without its call, no call without its results.
    for index in kept.turns:
        if turns[index].role == "tool" and turns[index].group is not None:
            call = next(i for i in reversed(range(index)) if turns[i].role == "assistant")
            assert call in kept.turns
    # Cleared results are what the result says, and only results that could be.
    cleared = {i for i in kept.turns if kept.contents[i] != turns[i].content}
    assert cleared == set(trimmed.cleared)
    latest = set(grouped[-1])
    for index in cleared:
        assert turns[index].role == "tool"
        assert index not in latest
        assert options.clear_tool_results
        assert turns[index].name not in options.never_clear
    # Older results are cleared oldest first (the cleared ones lead the list of those that
    # clearing shrinks); before any unit goes, all of them are.
    tools = [i for i, t in enumerate(turns) if t.role == "tool" and i not in latest]
    older = [
        i
        for i in tools[: max(len(tools) - options.keep_tool_results, 0)]
        if turns[i].name not in options.never_clear
        and O200K.count(line(turns[i], placeholder(turns[i]))) < O200K.count(line(turns[i]))
    ]
    sent = [i for i in older if i in kept.turns]
    if options.clear_tool_results:
        assert sent[: len(cleared & set(older))] == sorted(cleared & set(older))
    if trimmed.gaps and options.clear_tool_results:
        assert set(sent) <= cleared
    # The first unit is kept whenever it fits beside the latest one.
    if len(grouped) > 1 and grouped[0][0] not in kept.turns:
        between = len(turns) - len(grouped[0]) - len(grouped[-1])
        lines = cheapest(turns, grouped[0], options, latest=False)
        if between:
            lines.append(f"[… {between} messages omitted …]")
        lines += cheapest(turns, grouped[-1], options, latest=True)
        assert O200K.count(section(lines)) + gap_room(options) > max_tokens - SLACK


def check_unfit(
    turns: list[Turn], error: ContextBudgetError, max_tokens: int, options: HistoryOptions
) -> None:
    """The error is justified: the latest unit alone, framed, does not fit; and it is named."""
    grouped = units(turns)
    latest = section(cheapest(turns, grouped[-1], options, latest=True))
    gap = gap_room(options) if len(grouped) > 1 else 0
    assert O200K.count(latest) + gap > max_tokens - SLACK
    assert error.claimant == "history"
    for index in grouped[-1]:
        assert f"(history[{index}])" in str(error)


def check_messages(result: Assembled) -> None:
    """A valid request for both providers, checked here and by the SDKs' request types."""
    openai = result.messages(style="openai")
    roles = [m["role"] for m in openai]
    body = roles[1:] if roles[:1] == ["system"] else roles
    assert "system" not in body
    assert body[0] == "user"
    assert body[-1] == "user"
    openai_valid(openai)
    prompt = result.messages(style="anthropic")
    messages = prompt["messages"]
    assert messages[0]["role"] == messages[-1]["role"] == "user"
    assert all(a["role"] != b["role"] for a, b in itertools.pairwise(messages))
    assert all(block["text"].strip() for m in messages for block in m["content"])
    anthropic_valid(prompt)


@given(
    turns=agent_histories(),
    max_tokens=st.integers(30, 1_500),
    options=history_options,
)
def test_agent_history_is_budgeted_whole_and_valid(
    turns: list[Turn], max_tokens: int, options: HistoryOptions
) -> None:
    try:
        trimmed = trim_history(turns, max_tokens=max_tokens, tokenizer=O200K, history=options)
    except ContextBudgetError as error:
        event("latest unit does not fit")
        check_unfit(turns, error, max_tokens, options)
        return
    event("units dropped" if trimmed.gaps else "cleared" if trimmed.cleared else "all fit")
    check_trimmed(turns, trimmed, max_tokens, options)

    budget = budget_for("history", max_tokens, total=max_tokens)
    in_session = ContextAssembler(tokenizer=O200K, budget=budget, history=options)
    check_trimmed(turns, in_session.trim_history(turns), max_tokens, options)
    # trim_history keeps no summaries, so its runs end at the fewest turns: headroom 0.
    fewest = options.model_copy(update={"summary_headroom": 0})
    assembler = ContextAssembler(tokenizer=O200K, budget=budget, history=fewest)
    assert assembler.trim_history(turns) == trimmed
    result = assembler.assemble(history=turns)
    assert result.text == trimmed.text
    assert result.report.total == O200K.count(result.text) <= max_tokens
    assert result.history == trimmed.messages
    assert [i for i in result.history_turns if i is not None] == list(trimmed.kept)
    assert result.cleared == trimmed.cleared
    # The same spans; the assembler's second request finds trim_history's summaries cached.
    again = {"summarized": "cached"}
    assert [
        s.model_copy(update={"outcome": again.get(s.outcome, s.outcome)}) for s in trimmed.summaries
    ] == list(result.report.summaries)
    if options.summarize is summary:
        assert all(s.outcome in ("summarized", "cached", "too_long") for s in trimmed.summaries)
    check_messages(result)


# --- assemble without a question ----------------------------------------------------------------


def round_trip(result_words: int = 400) -> list[Turn]:
    """A question, the agent's call and its result: the model answers the result next."""
    return [
        Turn(role="user", content="How long do refunds take?"),
        Turn(role="assistant", content='search({"q": "refund time"})', group="c1"),
        Turn(role="tool", name="search", content=words(result_words, "r"), group="c1"),
    ]


@pytest.mark.parametrize(
    "budget",
    [Budget.default(), Budget.for_model("gpt-4o", reserve_output=4_000)],
    ids=["default", "gpt-4o"],
)
def test_tool_round_trip_over_the_question_allocation_is_sent_as_history(budget: Budget) -> None:
    # Sent as the question, a 400-word result raised: 'question' needs ... only 200 are left.
    result = ContextAssembler(tokenizer="gpt-4o", budget=budget).assemble(
        system="You help.", history=round_trip()
    )
    assert result.history_turns == (0, 1, 2)
    assert result.report.total <= result.report.budget


def test_latest_tool_result_that_cannot_fit_names_itself_and_its_size() -> None:
    with pytest.raises(
        ContextBudgetError,
        match=r"'history' needs [\d,]+ tokens but only 1,500 are left: the latest 2 messages "
        r"\(one unit\) are always sent, whole: assistant message \(history\[1\]\) of 10 tokens, "
        r"tool result 'search' \(history\[2\]\) of 3,802 tokens",
    ):
        ContextAssembler(tokenizer="gpt-4o").assemble(history=round_trip(1_600))


def test_assemble_without_a_question_has_no_question_section() -> None:
    result = ContextAssembler(tokenizer="gpt-4o").assemble(history=round_trip(20))
    assert "Question:" not in result.text
    assert result.tail == ""
    assert result.text.endswith("</conversation>")


def test_assemble_without_a_question_messages_end_with_the_latest_unit() -> None:
    result = ContextAssembler(tokenizer="gpt-4o").assemble(history=round_trip(20))
    assert result.messages()[-1] == {"role": "tool", "content": words(20, "r")}
    assert result.messages(style="openai")[-1] == {
        "role": "user",
        "content": "Tool: " + words(20, "r"),
    }
    last = result.messages(style="anthropic")["messages"][-1]
    assert last == {
        "role": "user",
        "content": [{"type": "text", "text": "Tool: " + words(20, "r")}],
    }


def test_assemble_without_a_question_sends_memory_and_sources_after_the_history() -> None:
    result = ContextAssembler(tokenizer="gpt-4o").assemble(
        history=round_trip(20),
        memory="Prefers short answers.",
        chunks=[Chunk(id="c1", content="Refunds take 14 days.")],
    )
    assert result.text.index("</conversation>") < result.text.index("<memory>")
    assert result.messages(style="openai")[-1] == {"role": "user", "content": result.tail}
    last = result.messages(style="anthropic")["messages"][-1]
    assert [block["text"] for block in last["content"]] == ["Tool: " + words(20, "r"), result.tail]


def test_assemble_without_a_question_opens_with_the_user_after_a_dropped_first_turn() -> None:
    turns = [Turn(role="assistant", content="Hi! " * 300), *round_trip(20)]
    budget = Budget(total=400, allocations=(Allocation("history", max=300, priority=1),))
    result = ContextAssembler(tokenizer="gpt-4o", budget=budget).assemble(history=turns)
    assert result.history[0] == ("user", "[… 1 message omitted …]")
    check_messages(result)


def test_assemble_without_a_question_opening_assistant_turn_gets_a_user_note() -> None:
    turns = [Turn(role="assistant", content="Hi!"), *round_trip(20)]
    result = ContextAssembler(tokenizer="gpt-4o").assemble(history=turns)
    assert result.messages(style="openai")[0] == {"role": "user", "content": CONVERSATION_START}
    check_messages(result)


def test_assemble_without_a_question_or_history_is_an_error() -> None:
    with pytest.raises(InputError, match=r"question must be a non-empty str, but got None \(None"):
        ContextAssembler(tokenizer="gpt-4o").assemble()


def test_assemble_without_a_question_history_ending_with_the_assistant_is_an_error() -> None:
    turns = [*round_trip(20), Turn(role="assistant", content="Refunds take 14 days.")]
    with pytest.raises(
        InputError,
        match=r"history\[3\] is an assistant turn; pass the user's next message as question=",
    ):
        ContextAssembler(tokenizer="gpt-4o").assemble(history=turns)


def test_assemble_without_a_question_blank_history_is_an_error() -> None:
    with pytest.raises(InputError, match="every history turn is blank"):
        ContextAssembler(tokenizer="gpt-4o").assemble(history=[Turn(role="user", content=" ")])


def test_assemble_with_a_question_does_not_make_the_last_turn_a_floor() -> None:
    # With a question, the question is the latest message: an outsized last answer goes.
    turns = [Turn(role="user", content="Hi"), Turn(role="assistant", content="x " * 3_000)]
    result = ContextAssembler(tokenizer="gpt-4o").assemble(question="And?", history=turns)
    assert [d.reason for d in result.report.dropped] == ["oversize"]


def test_assembled_history_turns_point_each_entry_at_its_input_turn() -> None:
    turns = [Turn(role="user", content="Hi " * 400), *round_trip(20)]
    budget = Budget(total=400, allocations=(Allocation("history", max=300, priority=1),))
    result = ContextAssembler(tokenizer="gpt-4o", budget=budget).assemble(history=turns)
    assert result.history_turns == (None, 1, 2, 3)
