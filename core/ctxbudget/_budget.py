"""The token budget as data: a total, an output reserve, and one allocation per claimant.

Budgets load from JSON/TOML/YAML and are checked up front, so a floor that can never
fit is a configuration error at startup rather than a failure on some unlucky request.
`Budget.from_file` and `Budget.parse` report a bad budget as one sentence that names
the place to fix in the file's own syntax (``[allocations.retrieved] min``).
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from ctxbudget._arguments import check_int, check_type
from ctxbudget._errors import BudgetError
from ctxbudget._models import CONTEXT_WINDOWS, UnknownModelError, resolve_model

__all__ = [
    "CLAIMANTS",
    "CONTEXT_WINDOWS",
    "Allocation",
    "Budget",
    "Claimant",
    "Syntax",
]

Claimant = Literal["system", "question", "retrieved", "examples", "tools", "history", "memory"]
"""The parts of a prompt that compete for tokens."""

CLAIMANTS: tuple[Claimant, ...] = get_args(Claimant)

Syntax = Literal["toml", "json"]
"""The file syntax a budget's error messages are written in."""

_NonNegative = Annotated[int, Field(ge=0)]


class _AllocationError(ValueError):
    """A validator's complaint about one allocation, kept apart from where that allocation is,
    so `Budget.parse` can say where in the file's own syntax."""

    def __init__(self, problem: str, *, allocation: str) -> None:
        self.problem = problem
        self.allocation = allocation
        super().__init__(f"allocation {allocation!r}: {problem}")


class Allocation(BaseModel):
    """How many tokens one claimant may take, and how badly it needs them.

    >>> Allocation("retrieved", min=1_200, max=3_000, priority=1)
    Allocation('retrieved', min=1200, max=3000, priority=1)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Claimant
    min: _NonNegative = 0
    """Floor: space guaranteed to this claimant (up to its content) or the request fails."""
    max: _NonNegative | None = None
    """Cap on what the claimant may take; None means no cap. A max of 0 is a cap."""
    priority: _NonNegative
    """0 is never trimmed; among the rest, lower numbers are served first and trimmed last."""

    def __init__(
        self,
        name: Claimant | None = None,
        /,
        *,
        min: int = 0,
        max: int | None = None,
        priority: int | None = None,
        **data: Any,
    ) -> None:
        if name is not None:
            data["name"] = name
        if priority is not None:
            data["priority"] = priority
        super().__init__(min=min, max=max, **data)

    @model_validator(mode="after")
    def _min_le_max(self) -> Self:
        if self.max is not None and self.min > self.max:
            raise _AllocationError(
                f"min ({self.min}) is greater than max ({self.max}); lower min or raise max",
                allocation=self.name,
            )
        return self

    @property
    def required(self) -> bool:
        """Whether the claimant may not be left out: priority 0, or a floor above 0."""
        return self.priority == 0 or self.min > 0

    def floor(self, content: int) -> int:
        """The tokens this claimant must keep of `content` tokens, on estimates and on the
        final string alike: all of it at priority 0, else up to `min` (a floor guards
        space, not content)."""
        return content if self.priority == 0 else min(content, self.min)

    def __repr__(self) -> str:
        return (
            f"Allocation({self.name!r}, min={self.min}, max={self.max}, priority={self.priority})"
        )


_IMPLICIT: tuple[Claimant, ...] = ("system", "question")
"""Claimants every budget allocates: when left out, they get `Allocation(name, priority=0)`."""


class Budget(BaseModel):
    """The whole prompt budget: `total` tokens, of which `reserve_output` stay free for the answer.

    `allocations` may be a list of allocations or, handier in TOML, a mapping from
    claimant name to its settings. A budget that leaves out ``system`` or ``question``
    gets ``Allocation("system", priority=0)`` / ``Allocation("question", priority=0)``
    after the ones it gives: never trimmed, no floor, no cap (the whole text, or
    `ContextBudgetError` when it cannot fit). They are ordinary allocations from then on:
    listed in `allocations`, returned by `allocation()`, and written by `model_dump`, so a
    dump states the whole budget and validates back to an equal one.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: Annotated[int, Field(gt=0)]
    """The model's context window, or any smaller hard limit for input plus output."""
    reserve_output: _NonNegative = 0
    """Tokens kept free for the model's answer."""
    allocations: tuple[Allocation, ...]

    @model_validator(mode="before")
    @classmethod
    def _allocations_from_mapping(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("allocations"), Mapping):
            allocations = []
            for name, settings in data["allocations"].items():
                if isinstance(settings, Mapping):
                    if settings.get("name", name) != name:
                        raise _AllocationError(
                            f"sets name = {_shown(settings['name'])}, but its key already "
                            "names it; remove name",
                            allocation=name,
                        )
                    settings = {**settings, "name": name}
                allocations.append(settings)
            data = {**data, "allocations": allocations}
        return data

    @field_validator("allocations")
    @classmethod
    def _add_implicit(cls, allocations: tuple[Allocation, ...]) -> tuple[Allocation, ...]:
        given = {a.name for a in allocations}
        return allocations + tuple(
            Allocation(name, priority=0) for name in _IMPLICIT if name not in given
        )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.reserve_output >= self.total:
            raise ValueError(
                f"reserve_output ({self.reserve_output}) must be less than total ({self.total}); "
                "nothing would be left for the prompt"
            )
        seen: set[str] = set()
        for allocation in self.allocations:
            if allocation.name in seen:
                raise _AllocationError(
                    "appears twice; give each claimant one allocation", allocation=allocation.name
                )
            seen.add(allocation.name)
        floors = sum(a.min for a in self.allocations)
        if floors > self.available:
            listed = ", ".join(f"{a.name} {a.min}" for a in self.allocations if a.min)
            raise ValueError(
                f"the floors ({listed}) sum to {floors} tokens, but total - reserve_output is only "
                f"{self.available}, so they can never all be met; lower some min values or raise "
                "total"
            )
        return self

    @property
    def available(self) -> int:
        """Tokens the prompt may use: total minus the output reserve."""
        return self.total - self.reserve_output

    def allocation(self, name: Claimant) -> Allocation | None:
        """The allocation for claimant `name`, or None when the budget has none.

        ``system`` and ``question`` always have one: the implicit priority-0 allocation
        when the budget did not give one.
        """
        return next((a for a in self.allocations if a.name == name), None)

    def by_priority(self) -> list[Allocation]:
        """Allocations in serving order: priority, then the order they were declared."""
        return sorted(self.allocations, key=lambda a: a.priority)

    def binding_cap(self, name: Claimant, *, granted: int, used: int) -> int | None:
        """The max of claimant `name` when that cap, not the window, held it back: its grant
        reached its max while the prompt used under half of `available`. Otherwise None.

        The assembler warns with this when a claimant dropped items as ``over_budget``:
        most of the budget went unused, so the cap is what to raise.
        """
        allocation = self.allocation(name)
        if allocation is None or allocation.max is None:
            return None
        if granted < allocation.max or used * 2 >= self.available:
            return None
        return allocation.max

    @classmethod
    def default(cls, *, total: int = 6_000, reserve_output: int = 500) -> Budget:
        """A sane starting point for a RAG prompt (see the README, "The budget")."""
        return cls(
            total=total,
            reserve_output=reserve_output,
            allocations=DEFAULT_ALLOCATIONS,
        )

    @classmethod
    def for_context_window(
        cls,
        window: int,
        *,
        reserve_output: int,
        allocations: Sequence[Allocation] | None = None,
    ) -> Budget:
        """A budget whose total is a context window of `window` tokens, its allocations sized to it.

        The allocations start from `Budget.default()`'s layout, which is sized for 5,500
        prompt tokens (6,000 - 500). With ``available = window - reserve_output``:

        - up to 5,500, every min and max of the default layout is multiplied by
          ``available / 5,500`` (rounded down), so the floors always fit;
        - above 5,500, system (610), question (20 to 200) and examples (250) keep their
          sizes, because a system prompt does not grow with the window, and the caps of
          retrieved, tools, history and memory are the shares of `available` they have in
          the default layout: 3,000, 1,200, 1,500 and 400 out of 5,500 (about 55%, 22%,
          27% and 7%), rounded down. Retrieval's floor stays 1,200.

        Priorities are the default ones; at exactly 5,500 the result equals
        `Budget.default()`. `allocations`, when given, are used as they are (not scaled).
        `reserve_output` is required: the right reserve depends on how long the answers
        are and, for reasoning models, on how much they think, and models differ fourfold
        in how much they may write.

        >>> Budget.for_context_window(128_000, reserve_output=4_000).allocation("retrieved")
        Allocation('retrieved', min=1200, max=67636, priority=1)
        """
        check_int("window", window)
        check_int("reserve_output", reserve_output)
        if allocations is None:
            # A window no larger than the reserve gets an empty layout, so the error is
            # about the reserve, not about a negative size.
            allocations = _sized_allocations(max(window - reserve_output, 0))
        return cls.parse(
            {"total": window, "reserve_output": reserve_output, "allocations": tuple(allocations)}
        )

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        reserve_output: int,
        allocations: Sequence[Allocation] | None = None,
        window: int | None = None,
    ) -> Budget:
        """`for_context_window` with the context window of a known model.

        The model name is read by the one model-name rule, `resolve_model`, as for
        `get_tokenizer`: ``openai:gpt-4o-2024-08-06``, ``claude-sonnet-4-5`` and
        ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` all name known windows (README
        "Counting other models" lists them with their sources). A model whose input has a
        limit of its own gets ``total = min(window, input limit + reserve_output)``, so the
        prompt never passes that limit: gpt-5's 400,000 tokens take at most 272,000 of input.
        An open-weight model's window is its server's setting, so it is never assumed: pass
        `window` (``server_window(...)`` asks an Ollama or vLLM server for it), which is used
        in place of the known window, the name still read by the same rule.

        >>> Budget.for_model("GPT-4.1", reserve_output=8_000).total
        1047576
        """
        check_type(
            "model", model, str, "a model name (str)", 'e.g. Budget.for_model("gpt-4o", ...)'
        )
        check_int("reserve_output", reserve_output)
        fix = (
            "; use Budget.for_context_window(<tokens>, reserve_output=...) with the window "
            "from your provider's documentation"
        )
        try:
            info = resolve_model(model)
        except UnknownModelError as error:
            near = f" (the nearest known model is {error.nearest})" if error.nearest else ""
            raise BudgetError(f"unknown context window for model {model!r}{near}{fix}") from None
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
            raise BudgetError(f"window must be a whole number of tokens, got {window!r}")
        if window is not None and window <= 0:
            raise BudgetError(f"window must be more than 0 tokens, got {window}")
        window = info.context_window if window is None else window
        if window is None:
            raise BudgetError(
                f"unknown context window for model {model!r}: {info.source}; use "
                "Budget.for_context_window(<tokens>, reserve_output=...) with the window your "
                "provider documents or your server is set to, or Budget.for_model(..., "
                "window=<tokens>) (server_window(...) asks an Ollama or vLLM server for it)"
            )
        if info.input_limit is not None:
            window = min(window, info.input_limit + reserve_output)
        return cls.for_context_window(
            window, reserve_output=reserve_output, allocations=allocations
        )

    @classmethod
    def for_agent(cls, window: int, *, reserve_output: int) -> Budget:
        """A budget for an agent's model calls in a context window of `window` tokens: the
        system prompt never trimmed, tools up to their default share of what is available
        (22%, as in `for_context_window`), and history all the rest, uncapped.

        An agent sends no retrieved sources, examples or memory of ours, so the default
        layout would leave history its 27% share and the rest of the window unused: a
        tool result larger than that share could not be sent while the window had room.

        >>> Budget.for_agent(128_000, reserve_output=4_000).allocation("history")
        Allocation('history', priority=3)
        """
        check_int("window", window)
        check_int("reserve_output", reserve_output)
        sized = _sized_allocations(max(window - reserve_output, 0))
        allocations = (
            Allocation("system", priority=0),
            next(a for a in sized if a.name == "tools"),
            Allocation("history", priority=3),
        )
        return cls.for_context_window(
            window, reserve_output=reserve_output, allocations=allocations
        )

    @classmethod
    def parse(
        cls, data: object, *, syntax: Syntax = "json", needs: Collection[Claimant] = ()
    ) -> Budget:
        """Validate budget data (parsed JSON, TOML or YAML), raising `BudgetError` whose
        message is one sentence naming the place to fix in `syntax`.

        Args:
            needs: claimants the caller will send; a budget without an allocation for one
                of them is refused here, naming the table to add, instead of on a request.
        """
        try:
            budget = cls.model_validate(data)
        except ValidationError as exc:
            raise BudgetError(_explain(exc, data, syntax)) from None
        missing = [name for name in needs if budget.allocation(name) is None]
        if missing:
            raise BudgetError(_missing(missing, data, syntax))
        return budget

    @classmethod
    def from_file(cls, path: str | Path, *, needs: Collection[Claimant] = ()) -> Budget:
        """Load a budget from a ``.json`` or ``.toml`` file (see `parse`); any problem with
        the file is a `BudgetError` whose message starts with the path."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".toml", ".json"):
            raise BudgetError(
                f"cannot load a budget from {path.name!r}: expected a .json or .toml file "
                "(for YAML, use Budget.parse(yaml.safe_load(...)))"
            )
        syntax: Syntax = "toml" if suffix == ".toml" else "json"
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise BudgetError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        try:
            data = tomllib.loads(text) if syntax == "toml" else _json_loads(text)
            return cls.parse(data, syntax=syntax, needs=needs)
        except tomllib.TOMLDecodeError as exc:
            raise BudgetError(f"{path}: not valid TOML: {exc}") from None
        except json.JSONDecodeError as exc:
            raise BudgetError(
                f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        except BudgetError as exc:
            raise BudgetError(f"{path}: {exc}") from None


DEFAULT_ALLOCATIONS: tuple[Allocation, ...] = (
    Allocation("system", min=610, max=610, priority=0),
    Allocation("question", min=20, max=200, priority=0),
    Allocation("retrieved", min=1_200, max=3_000, priority=1),
    Allocation("examples", min=250, max=250, priority=1),
    Allocation("tools", max=1_200, priority=2),
    Allocation("history", max=1_500, priority=3),
    Allocation("memory", max=400, priority=4),
)
"""The allocations of `Budget.default()`; the numbers and their reasons are in the README."""

_DEFAULT_AVAILABLE = 5_500
"""The prompt tokens `DEFAULT_ALLOCATIONS` are sized for: `Budget.default()`'s 6,000 - 500."""

_FIXED_SIZE: frozenset[Claimant] = frozenset({"system", "question", "examples"})
"""Claimants whose size does not grow with the window."""


def _sized_allocations(available: int) -> tuple[Allocation, ...]:
    """The default layout sized to `available` prompt tokens (see `Budget.for_context_window`)."""

    def share(tokens: int) -> int:
        return tokens * available // _DEFAULT_AVAILABLE

    def cap(a: Allocation) -> int | None:
        return None if a.max is None else share(a.max)

    if available <= _DEFAULT_AVAILABLE:
        return tuple(
            Allocation(a.name, min=share(a.min), max=cap(a), priority=a.priority)
            for a in DEFAULT_ALLOCATIONS
        )
    return tuple(
        a
        if a.name in _FIXED_SIZE
        else Allocation(a.name, min=a.min, max=cap(a), priority=a.priority)
        for a in DEFAULT_ALLOCATIONS
    )


def _json_loads(text: str) -> object:
    """Parse JSON, refusing a key given twice in one object (JSON would keep the last)."""

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for key, value in pairs:
            if key in data:
                raise BudgetError(
                    f"the key {json.dumps(key)} appears twice in one object; keep one"
                )
            data[key] = value
        return data

    return json.loads(text, object_pairs_hook=unique)


# --- messages in the file's own syntax ------------------------------------------------------

_BUDGET_FIELDS = ("total", "reserve_output", "allocations")
_ALLOCATION_FIELDS = ("name", "min", "max", "priority")
_PLACEHOLDERS = {
    "total": "<tokens>",
    "reserve_output": "<tokens>",
    "min": "<tokens>",
    "max": "<tokens>",
    "priority": "<n>",
    "name": '"<claimant>"',
}
_WHY = {
    "priority": " (0 is never trimmed; higher numbers are trimmed first)",
    "name": f" (one of {', '.join(CLAIMANTS)})",
    "total": " (the model's context window)",
}


def _explain(error: ValidationError, data: object, syntax: Syntax) -> str:
    """One sentence for all of `error`'s problems, each placed in `data` in `syntax`."""
    where = _Places(data, syntax)
    return "; ".join(_problem(detail, where) for detail in error.errors())


class _Places:
    """Names places in the budget data the way its file writes them."""

    def __init__(self, data: object, syntax: Syntax) -> None:
        self.syntax = syntax
        allocations = data.get("allocations") if isinstance(data, Mapping) else None
        self.keys: list[str] | None = (
            [str(k) for k in allocations] if isinstance(allocations, Mapping) else None
        )
        self.items: list[object] = (
            list(allocations) if isinstance(allocations, list | tuple) else []
        )

    def table(self, index: int) -> str:
        """The allocation at `index` of the validated list, as the file names it."""
        if self.keys is not None:
            return _key_path(self.keys[index], self.syntax)
        item = self.items[index] if index < len(self.items) else None
        name = item.get("name") if isinstance(item, Mapping) else None
        if self.syntax == "json":
            return f"allocations[{index}]"
        named = f" (name = {json.dumps(name)})" if isinstance(name, str) else ""
        return f"[[allocations]] #{index + 1}{named}"

    def named(self, name: str) -> str:
        """The allocation called `name` (the last one, when it appears twice)."""
        if self.keys is not None and name in self.keys:
            return self.table(self.keys.index(name))
        names = [i.get("name") if isinstance(i, Mapping) else None for i in self.items]
        if name in names:
            return self.table(len(names) - 1 - names[::-1].index(name))
        return f"allocation {name!r}"

    def field(self, loc: tuple[int | str, ...]) -> tuple[str | None, str]:
        """(the allocation's table or None at top level, the field) for a field's location."""
        if len(loc) >= 3 and loc[0] == "allocations" and isinstance(loc[1], int):
            return self.table(loc[1]), str(loc[2])
        return None, str(loc[0])

    def add(self, field: str, table: str | None) -> str:
        value = _PLACEHOLDERS.get(field, "...")
        line = f"{field} = {value}" if self.syntax == "toml" else f'"{field}": {value}'
        if table is None:
            spot = "at the top of the file" if self.syntax == "toml" else "to the top-level object"
        else:
            spot = f"to {table}"
        return f"add {line} {spot}{_WHY.get(field, '')}"


def _problem(detail: ErrorDetails, where: _Places) -> str:
    loc = detail["loc"]
    kind = detail["type"]
    value = _shown(detail["input"])
    ctx = detail.get("ctx", {})
    if kind == "value_error":
        error = ctx.get("error")
        if isinstance(error, _AllocationError):
            label = (
                where.table(loc[1])
                if len(loc) == 2 and isinstance(loc[1], int)
                else where.named(error.allocation)
            )
            return f"{label}: {error.problem}"
        return str(error)
    if kind == "model_type" and not loc:
        shape = "a table" if where.syntax == "toml" else "an object"
        return f"a budget must be {shape} with total, reserve_output and allocations"
    if kind == "tuple_type" and loc == ("allocations",):
        shape = (
            "[allocations.<claimant>] tables or [[allocations]] tables"
            if where.syntax == "toml"
            else "an object of claimant names or a list of objects"
        )
        return f"allocations must be {shape}, but is {value}"
    if kind == "model_type" and len(loc) == 2 and isinstance(loc[1], int):
        shape = "a table" if where.syntax == "toml" else "an object"
        settings = "priority (and optionally min and max)"
        return f"{where.table(loc[1])} must be {shape} with {settings}, but is {value}"
    if kind == "missing" and loc == ("allocations",):
        example = (
            "an [allocations.retrieved] table with max = 3000 and priority = 1"
            if where.syntax == "toml"
            else '"allocations": {"retrieved": {"max": 3000, "priority": 1}}'
        )
        return f"add one allocation per part of the prompt you send, e.g. {example}"
    table, field = where.field(loc)
    place = field if table is None else f"{table}{' ' if where.syntax == 'toml' else '.'}{field}"
    if kind == "missing":
        return where.add(field, table)
    if kind == "extra_forbidden":
        known = _BUDGET_FIELDS if table is None else _ALLOCATION_FIELDS
        close = difflib.get_close_matches(field, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        top = "the top of the file" if where.syntax == "toml" else "the top-level object"
        name = field if field.isidentifier() and field.isascii() else _shown(field)
        return f"remove {name} from {table or top}: it takes only {', '.join(known)}{hint}"
    if kind == "literal_error" and where.keys is not None and table is not None:
        return f"{table} is not a claimant; name the table after one of {', '.join(CLAIMANTS)}"
    if kind == "literal_error":
        return f"{place} must be one of {', '.join(CLAIMANTS)}, but is {value}"
    if kind == "greater_than":
        return f"{place} must be greater than {ctx['gt']}, but is {value}"
    if kind == "greater_than_equal":
        return f"{place} must be {ctx['ge']} or more, but is {value}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{place} must be a whole number, but is {value}"
    message = detail["msg"]
    return f"{place}: {message[:1].lower()}{message[1:]}"


def _missing(names: list[Claimant], data: object, syntax: Syntax) -> str:
    """Say which allocations to add for claimants the caller sends, in the file's syntax."""
    allocations = data.get("allocations") if isinstance(data, Mapping) else None
    listed = isinstance(allocations, list | tuple)
    defaults = {a.name: a for a in DEFAULT_ALLOCATIONS}
    snippets = []
    for name in names:
        example = defaults[name]
        settings = {"min": example.min or None, "max": example.max, "priority": example.priority}
        shown = {k: v for k, v in settings.items() if v is not None}
        if syntax == "toml":
            keys = ", ".join(f"{k} = {v}" for k, v in shown.items())
            table = (
                f'an [[allocations]] table with name = "{name}"'
                if listed
                else f"an [allocations.{name}] table"
            )
            snippets.append(f"{table} (for example with {keys})")
        elif listed:
            snippets.append(f'{json.dumps({"name": name, **shown})} to "allocations"')
        else:
            snippets.append(f'{json.dumps(name)}: {json.dumps(shown)} to "allocations"')
    sent = " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))
    verbs = "are sent but have" if len(names) > 1 else "is sent but has"
    return f"{sent} {verbs} no allocation; add " + "; ".join(snippets)


def _key_path(key: str, syntax: Syntax) -> str:
    """The allocation under `key` as TOML's table header or a JavaScript-style JSON path,
    quoting the key only where the syntax needs it."""
    if syntax == "toml":
        bare = key != "" and all(c.isascii() and (c.isalnum() or c in "_-") for c in key)
        return f"[allocations.{key if bare else json.dumps(key)}]"
    if key.isidentifier() and key.isascii():
        return f"allocations.{key}"
    return f"allocations[{json.dumps(key)}]"


def _shown(value: object) -> str:
    """A value as the file would write it, shortened to stay within one readable sentence."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
