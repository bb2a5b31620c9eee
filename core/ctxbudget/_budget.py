"""The token budget as data: a total, an output reserve, and one allocation per claimant.

Budgets load from JSON/TOML/YAML and are checked up front, so a floor that can never
fit is a configuration error at startup rather than a failure on some unlucky request.
`Budget.from_file` and `Budget.parse` report a bad budget as one sentence that names
the place to fix in the file's own syntax (``[allocations.retrieved] min``), written by
`_budget_messages.py`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ctxbudget._arguments import check_int, check_type
from ctxbudget._budget_messages import AllocationError, Syntax, displayed, explain
from ctxbudget._claimants import Claimant
from ctxbudget._errors import InvalidBudgetError
from ctxbudget._models import CONTEXT_WINDOWS, UnknownModelError, resolve_model

__all__ = ["CONTEXT_WINDOWS", "Allocation", "Budget"]

_NonNegative = Annotated[int, Field(ge=0)]


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
            raise AllocationError(
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
                        raise AllocationError(
                            f"sets name = {displayed(settings['name'])}, but its key already "
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
                raise AllocationError(
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
        """A sane starting point for a RAG prompt (docs/budget.md, "The budget")."""
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
        ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` all name known windows (docs/budget.md,
        "Budgets that fit the model" lists them with their sources). A model whose input has a
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
            raise InvalidBudgetError(
                f"unknown context window for model {model!r}{near}{fix}"
            ) from None
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
            raise InvalidBudgetError(f"window must be a whole number of tokens, got {window!r}")
        if window is not None and window <= 0:
            raise InvalidBudgetError(f"window must be more than 0 tokens, got {window}")
        window = info.context_window if window is None else window
        if window is None:
            raise InvalidBudgetError(
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
        """Validate budget data (parsed JSON, TOML or YAML), raising `InvalidBudgetError` whose
        message is one sentence naming the place to fix in `syntax`.

        Args:
            needs: claimants the caller will send; a budget without an allocation for one
                of them is refused here, naming the table to add, instead of on a request.
        """
        try:
            budget = cls.model_validate(data)
        except ValidationError as exc:
            raise InvalidBudgetError(explain(exc, data, syntax)) from None
        missing = [name for name in needs if budget.allocation(name) is None]
        if missing:
            raise InvalidBudgetError(_missing(missing, data, syntax))
        return budget

    @classmethod
    def from_file(cls, path: str | Path, *, needs: Collection[Claimant] = ()) -> Budget:
        """Load a budget from a ``.json`` or ``.toml`` file (see `parse`); any problem with
        the file is a `InvalidBudgetError` whose message starts with the path."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".toml", ".json"):
            raise InvalidBudgetError(
                f"cannot load a budget from {path.name!r}: expected a .json or .toml file "
                "(for YAML, use Budget.parse(yaml.safe_load(...)))"
            )
        syntax: Syntax = "toml" if suffix == ".toml" else "json"
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidBudgetError(
                f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
            ) from None
        try:
            data = tomllib.loads(text) if syntax == "toml" else _json_loads(text)
            return cls.parse(data, syntax=syntax, needs=needs)
        except tomllib.TOMLDecodeError as exc:
            raise InvalidBudgetError(f"{path}: not valid TOML: {exc}") from None
        except json.JSONDecodeError as exc:
            raise InvalidBudgetError(
                f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        except InvalidBudgetError as exc:
            raise InvalidBudgetError(f"{path}: {exc}") from None


DEFAULT_ALLOCATIONS: tuple[Allocation, ...] = (
    Allocation("system", min=610, max=610, priority=0),
    Allocation("question", min=20, max=200, priority=0),
    Allocation("retrieved", min=1_200, max=3_000, priority=1),
    Allocation("examples", min=250, max=250, priority=1),
    Allocation("tools", max=1_200, priority=2),
    Allocation("history", max=1_500, priority=3),
    Allocation("memory", max=400, priority=4),
)
"""The allocations of `Budget.default()`; the numbers and their reasons: docs/budget.md,
"The budget"."""

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
                raise InvalidBudgetError(
                    f"the key {json.dumps(key)} appears twice in one object; keep one"
                )
            data[key] = value
        return data

    return json.loads(text, object_pairs_hook=unique)


# Beside DEFAULT_ALLOCATIONS, whose settings it suggests, rather than with the messages
# `explain` writes: those need nothing from this module.
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
