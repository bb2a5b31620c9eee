"""The token budget as data: a total, an output reserve, and one allocation per claimant.

Budgets load from JSON/TOML/YAML with `Budget.model_validate` and are checked up
front, so a floor that can never fit is a configuration error at startup rather
than a failure on some unlucky request.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CLAIMANTS", "CONTEXT_WINDOWS", "Allocation", "Budget", "Claimant"]

Claimant = Literal["system", "question", "retrieved", "examples", "tools", "history", "memory"]
"""The parts of a prompt that compete for tokens."""

CLAIMANTS: tuple[Claimant, ...] = get_args(Claimant)

CONTEXT_WINDOWS: Mapping[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
}
"""Input context windows (tokens) of models whose tokenizer tiktoken knows.

Dated snapshots (``gpt-4o-2024-08-06``) resolve by their longest listed prefix.
"""

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
            raise ValueError(
                f"allocation {self.name!r}: min ({self.min}) is greater than max ({self.max}); "
                "lower min or raise max"
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


class Budget(BaseModel):
    """The whole prompt budget: `total` tokens, of which `reserve_output` stay free for the answer.

    `allocations` may be a list of allocations or, handier in TOML, a mapping from
    claimant name to its settings.
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
            allocations = [
                {"name": name, **settings} if isinstance(settings, Mapping) else settings
                for name, settings in data["allocations"].items()
            ]
            data = {**data, "allocations": allocations}
        return data

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
                raise ValueError(
                    f"allocation {allocation.name!r} appears twice; "
                    "give each claimant one allocation"
                )
            seen.add(allocation.name)
        floors = sum(a.min for a in self.allocations)
        if floors > self.available:
            listed = ", ".join(f"{a.name} {a.min}" for a in self.allocations if a.min)
            raise ValueError(
                f"the floors ({listed}) sum to {floors} tokens, but total - reserve_output is only "
                f"{self.available}; they can never all be met. Lower some min values or raise total"
            )
        return self

    @property
    def available(self) -> int:
        """Tokens the prompt may use: total minus the output reserve."""
        return self.total - self.reserve_output

    def allocation(self, name: Claimant) -> Allocation | None:
        """The allocation for claimant `name`, or None when the budget has none."""
        return next((a for a in self.allocations if a.name == name), None)

    def by_priority(self) -> list[Allocation]:
        """Allocations in serving order: priority, then the order they were declared."""
        return sorted(self.allocations, key=lambda a: a.priority)

    @classmethod
    def default(cls, *, total: int = 6_000, reserve_output: int = 500) -> Budget:
        """A sane starting point for a RAG prompt (see the README for the reasoning)."""
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
        allocations: tuple[Allocation, ...] | None = None,
    ) -> Budget:
        """A budget whose total is a model's whole context window."""
        return cls(
            total=window,
            reserve_output=reserve_output,
            allocations=DEFAULT_ALLOCATIONS if allocations is None else allocations,
        )

    @classmethod
    def for_model(
        cls,
        model: str,
        *,
        reserve_output: int,
        allocations: tuple[Allocation, ...] | None = None,
    ) -> Budget:
        """A budget sized to a known model's context window (see `CONTEXT_WINDOWS`)."""
        match = max((m for m in CONTEXT_WINDOWS if model.startswith(m)), key=len, default=None)
        if match is None:
            raise ValueError(
                f"unknown context window for model {model!r}; use "
                "Budget.for_context_window(<tokens>, reserve_output=...) with the window "
                "from your provider's documentation"
            )
        return cls.for_context_window(
            CONTEXT_WINDOWS[match], reserve_output=reserve_output, allocations=allocations
        )

    @classmethod
    def from_file(cls, path: str | Path) -> Budget:
        """Load a budget from a ``.json`` or ``.toml`` file."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".toml":
            return cls.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
        if suffix == ".json":
            return cls.model_validate(json.loads(path.read_text(encoding="utf-8")))
        raise ValueError(
            f"cannot load a budget from {path.name!r}: expected a .json or .toml file "
            "(for YAML, use Budget.model_validate(yaml.safe_load(...)))"
        )


DEFAULT_ALLOCATIONS: tuple[Allocation, ...] = (
    Allocation("system", min=610, max=610, priority=0),
    Allocation("question", min=20, max=200, priority=0),
    Allocation("retrieved", min=1_200, max=3_000, priority=1),
    Allocation("examples", min=250, max=250, priority=1),
    Allocation("tools", max=1_200, priority=2),
    Allocation("history", max=1_500, priority=3),
    Allocation("memory", max=400, priority=4),
)
"""The allocations of `Budget.default()`; the numbers from DESIGN.md."""
