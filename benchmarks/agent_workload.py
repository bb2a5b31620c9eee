"""The agent benchmark's conversation: a deterministic 35-turn tool-calling session, as data.

A returns-desk agent with four tools. Each turn is a user message, zero to two rounds of
tool calls (one or two calls a round) answered by their results, and a final answer.
The shape is fixed (35 turns, 70 model calls, 47 tool results, 152 messages, as issue 18
measured) and a seed shuffles it and writes the texts: order look-ups of a few dozen
o200k tokens, SQL rows of up to 300, search results of up to 700 and file reads of up to
1,500. Nothing here imports a framework; `benchmarks.agents` replays it.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass

from benchmarks.workloads import ENCODING, prose
from ctxbudget import get_tokenizer

SEED = 18
TURNS = 35
SYSTEM = (
    "You are the returns desk assistant of an online shop. Use the tools to look up orders, "
    "search the policy documents, read the desk's files and query the returns database. "
    "Answer briefly and cite the policy you relied on."
)

_ROUNDS = (0,) * 5 + (1,) * 25 + (2,) * 5
"""Tool rounds per turn, shuffled: 35 rounds in all, so 35 + 35 = 70 model calls."""
_CALLS = (1,) * 23 + (2,) * 12
"""Calls per round, shuffled: 47 tool results."""
_TOOLS = ("get_order", "search_policies", "read_file", "query_returns")
_WEIGHTS = (5, 4, 1, 3)
"""How often the model calls each tool: small look-ups most, a long file read now and then."""
_SIZES = {
    "get_order": (35, 90),
    "search_policies": (150, 700),
    "read_file": (300, 1_500),
    "query_returns": (80, 300),
}
"""The range of a result's size in o200k tokens, per tool."""

_NAMES = ["Müller", "Okafor", "Tanaka", "Silva", "Nguyen", "Kowalski", "Haddad", "Laurent"]
_PROBLEMS = [
    "arrived with a cracked screen",
    "was delivered to the wrong address",
    "is missing its charger",
    "was returned but no refund has shown up",
    "was a gift and the receiver wants store credit",
    "came in the wrong size",
    "was opened and the seal is broken",
]
_FILES = ["desk/playbook.md", "desk/refund_rules.py", "desk/carriers.yaml", "desk/escalation.md"]


@dataclass(frozen=True)
class ScriptedCall:
    """One tool call the model makes, and the result its tool returns."""

    id: str
    name: str
    args: dict[str, str]
    result: str


@dataclass(frozen=True)
class ScriptedTurn:
    """A user message, the rounds of tool calls it takes, and the final answer."""

    user: str
    rounds: tuple[tuple[ScriptedCall, ...], ...]
    answer: str


@dataclass(frozen=True)
class Conversation:
    """The whole session, in the order things happen."""

    turns: tuple[ScriptedTurn, ...]

    @property
    def calls(self) -> int:
        """Model calls: one per round of tool calls and one per final answer."""
        return sum(len(turn.rounds) + 1 for turn in self.turns)

    @property
    def messages(self) -> int:
        """Messages in the finished conversation: user, AI and tool messages."""
        return sum(
            2 + len(turn.rounds) + sum(len(round_) for round_ in turn.rounds) for turn in self.turns
        )

    def history_sizes(self) -> list[int]:
        """How many messages the conversation holds when each model call is made."""
        sizes, held = [], 0
        for turn in self.turns:
            held += 1
            for round_ in turn.rounds:
                sizes.append(held)
                held += 1 + len(round_)
            sizes.append(held)
            held += 1
        return sizes

    def results(self) -> dict[str, str]:
        """Each tool call's result by call id."""
        return {c.id: c.result for t in self.turns for r in t.rounds for c in r}


def _prose(rng: random.Random, tokens: int) -> str:
    """Prose of about `tokens` o200k tokens (a sentence at least)."""
    return prose(rng, max(tokens, 12))


def _order(rng: random.Random, order_id: str, tokens: int) -> str:
    """An order record as JSON, with desk notes until it is `tokens` long."""
    record = {
        "order_id": order_id,
        "customer": rng.choice(_NAMES),
        "status": rng.choice(["delivered", "in transit", "returned", "refund pending"]),
        "items": [f"SKU-{rng.randrange(10_000, 99_999)}" for _ in range(rng.randint(1, 3))],
        "total_eur": f"{rng.uniform(12, 480):.2f}",
    }
    text = json.dumps(record, ensure_ascii=False)
    counter = get_tokenizer(ENCODING)
    while counter.count(text) < tokens:
        text += f"\nnote: {rng.choice(_PROBLEMS)} (logged {rng.randint(1, 28)} May)"
    return text


def _search(rng: random.Random, tokens: int) -> str:
    """Search hits of about 180 tokens each, with their files and scores."""
    hits = max(1, tokens // 180)
    return "\n\n".join(
        f"Result {i + 1}: policy/{rng.choice(['returns', 'refunds', 'warranty', 'shipping'])}"
        f"-{rng.randrange(100, 999)}.md (score {rng.uniform(0.5, 0.95):.2f})\n"
        f"{_prose(rng, tokens // hits - 20)}"
        for i in range(hits)
    )


def _file(rng: random.Random, path: str, tokens: int) -> str:
    """A desk file of at least `tokens`: rule functions for a .py path, steps otherwise."""
    counter = get_tokenizer(ENCODING)
    lines = [f"# {path}"]
    while counter.count("\n".join(lines)) < tokens:
        n = len(lines)
        if path.endswith(".py"):
            lines += [
                f"def rule_{n}(order, days_since_delivery):",
                f'    """{_prose(rng, 30)}"""',
                f"    return days_since_delivery <= {rng.choice([14, 30, 60])}  # clause {n}",
                "",
            ]
        else:
            lines += [f"## Step {n}", _prose(rng, 80), ""]
    return "\n".join(lines)


def _rows(rng: random.Random, tokens: int) -> str:
    """Query results as a pipe table of at least `tokens`."""
    counter = get_tokenizer(ENCODING)
    lines = ["order_id | reason | days | refund_eur"]
    while counter.count("\n".join(lines)) < tokens:
        lines.append(
            f"A-{rng.randrange(10_000, 99_999)} | {rng.choice(_PROBLEMS)} | "
            f"{rng.randint(1, 90)} | {rng.uniform(5, 300):.2f}"
        )
    return "\n".join(lines)


def _call(rng: random.Random, call_id: str) -> ScriptedCall:
    """One tool call, its tool and size drawn by `_WEIGHTS` and `_SIZES`."""
    name = rng.choices(_TOOLS, weights=_WEIGHTS)[0]
    low, high = _SIZES[name]
    size = rng.randint(low, high)
    if name == "get_order":
        order_id = f"A-{rng.randrange(10_000, 99_999)}"
        return ScriptedCall(call_id, name, {"order_id": order_id}, _order(rng, order_id, size))
    if name == "search_policies":
        query = f"{rng.choice(_PROBLEMS)} refund rules"
        return ScriptedCall(call_id, name, {"query": query}, _search(rng, size))
    if name == "read_file":
        path = rng.choice(_FILES)
        return ScriptedCall(call_id, name, {"path": path}, _file(rng, path, size))
    sql = f"SELECT * FROM returns WHERE days > {rng.randint(5, 60)} LIMIT {rng.randint(5, 40)}"
    return ScriptedCall(call_id, name, {"sql": sql}, _rows(rng, size))


_FIRST = (
    "I'm reviewing how our desk handles damaged and late returns for the Q3 audit. For every "
    "case I bring you today, check the order, the policy that applies and what we did for "
    "similar cases, and tell me whether the customer gets a refund, a replacement or store "
    "credit. Keep a running tally of refunds over 100 EUR: I need that total at the end."
)
"""The first user turn: it sets the task for the whole session."""


@functools.cache
def conversation(seed: int = SEED) -> Conversation:
    """The session for `seed`: the same seed always gives the same texts, calls and ids."""
    rng = random.Random(seed)
    rounds, calls = list(_ROUNDS), list(_CALLS)
    rng.shuffle(rounds)
    rng.shuffle(calls)
    turns = []
    for t in range(TURNS):
        user = (
            _FIRST
            if t == 0
            else f"Next case: {rng.choice(_NAMES)}'s order {rng.choice(_PROBLEMS)}. "
            f"{_prose(rng, rng.randint(10, 40))}"
        )
        script = tuple(
            tuple(_call(rng, f"call-{t}-{r}-{c}") for c in range(calls.pop()))
            for r in range(rounds[t])
        )
        answer = _prose(rng, rng.randint(50, 160))
        turns.append(ScriptedTurn(user=user, rounds=script, answer=answer))
    return Conversation(tuple(turns))
