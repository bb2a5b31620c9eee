"""What every experiment returns: a table of cells, each with n, noise floor and interval.

`str()` prints the table as plain text, `.table()` as a rich Table, `.to_dict()`,
`.to_json()` and `.to_csv()` export it, and `.plot()` draws it with matplotlib.
"""

from __future__ import annotations

import csv
import io
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final

from ctxbudget.eval._stats import RESAMPLES, Cell, difference, spread

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from rich.table import Table

__all__ = ["SPREAD_NOTE", "Result", "format_cell", "format_spread"]

SPREAD_NOTE: Final = (
    "spread: best - worst; p: exact paired sign test of best against worst, times the number "
    "of pairs; a spread of at most one case is noise"
)


def format_cell(cell: Cell, *, signed: bool = False) -> str:
    """``0.85 [0.70, 0.95]``: the score and its 95% interval (``+0.05 [-0.05, +0.15]`` signed)."""
    form = "+.2f" if signed else ".2f"
    return f"{cell.score:{form}} [{cell.low:{form}}, {cell.high:{form}}]"


def format_spread(cells: Sequence[Cell]) -> str:
    """``0.35 beyond noise (p=0.004)``: the spread of the scores and whether it could be noise."""
    width, label, p = spread(cells)
    return f"{width:.2f} {difference(label, p)}"


class Result(ABC):
    """The shared half of the experiments' results: notes, exports, table and plot."""

    title: ClassVar[str]
    """What the table and the plot are titled."""

    def __init__(self, *, n: int, seed: int, settings: Mapping[str, Any]) -> None:
        self._cases = n
        self.seed = seed
        """The seed of the distractor draws and of the bootstrap."""
        self.settings = dict(settings)
        """What the experiment was run with (sizes, ks, fields, model id, ...)."""

    @property
    def cases(self) -> int:
        """How many cases every cell holds."""
        return self._cases

    @property
    def noise_floor(self) -> float:
        """What one case moves a cell by: 1/n."""
        return 1 / self._cases

    @abstractmethod
    def records(self) -> list[dict[str, Any]]:
        """One flat record per cell: what `to_csv` writes and `to_dict` lists."""

    @abstractmethod
    def _columns(self) -> list[str]: ...

    @abstractmethod
    def _rows(self) -> list[list[str]]: ...

    @abstractmethod
    def _draw(self, axes: Axes) -> None: ...

    def _notes(self) -> list[str]:
        return [
            f"n = {self._cases} cases per cell; noise floor 1/n = {self.noise_floor:.3f}; "
            f"[low, high] = bootstrap 95% interval ({RESAMPLES:,} resamples, seed {self.seed})"
        ]

    def to_dict(self) -> dict[str, Any]:
        """Everything in the table, as JSON-ready data."""
        return {
            "experiment": self.title,
            "n": self._cases,
            "noise_floor": self.noise_floor,
            "interval": {"level": 0.95, "method": "percentile bootstrap", "resamples": RESAMPLES},
            "seed": self.seed,
            "settings": self.settings,
            "cells": self.records(),
            "notes": self._notes(),
        }

    def to_json(self, path: str | Path | None = None) -> str:
        """`to_dict()` as JSON; also written to `path` when given."""
        text = json.dumps(self.to_dict(), indent=2, ensure_ascii=False)
        if path is not None:
            Path(path).write_text(text + "\n", encoding="utf-8")
        return text

    def to_csv(self, path: str | Path | None = None) -> str:
        """`records()` as CSV, one row per cell; also written to `path` when given."""
        records = self.records()
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        if path is not None:
            Path(path).write_text(out.getvalue(), encoding="utf-8")
        return out.getvalue()

    def table(self) -> Table:
        """The table as a `rich.table.Table` (``rich.print(result.table())``); needs rich."""
        try:
            from rich.table import Table
        except ImportError:
            raise ImportError(
                "table() needs rich: pip install 'ctxbudget[eval]' (str(result) needs nothing)"
            ) from None
        table = Table(title=self.title, caption="\n".join(self._notes()))
        for index, column in enumerate(self._columns()):
            table.add_column(column, justify="left" if index == 0 else "right")
        for row in self._rows():
            table.add_row(*row)
        return table

    def __str__(self) -> str:
        columns, rows = self._columns(), self._rows()
        widths = [max(len(row[i]) for row in [columns, *rows]) for i in range(len(columns))]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        dashes = ["-" * w for w in widths]
        return "\n".join(
            [self.title, line(columns), line(dashes), *map(line, rows), *self._notes()]
        )

    def plot(self, path: str | Path) -> Path:
        """Draw the result with its intervals and save it (PNG for a ``.png`` path); needs
        matplotlib."""
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError("plot() needs matplotlib: pip install 'ctxbudget[plot]'") from None
        figure = Figure(figsize=(7, 4.5), layout="constrained")
        axes = figure.add_subplot()
        self._draw(axes)
        axes.set_title(self.title.partition(" (")[0])
        figure.savefig(path, dpi=120)
        return Path(path)
