"""Result tables: plain text, rich, JSON, CSV and PNG, each with n, noise floor and intervals."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ctxbudget import Chunk
from ctxbudget.eval import (
    Case,
    PositionResult,
    Result,
    ablation,
    k_knee,
    lexical_retriever,
    position_sensitivity,
    simulated_generator,
)

Corpus = tuple[list[Case], list[Chunk]]


@pytest.fixture(scope="module")
def results(corpus: Corpus) -> list[Result]:
    cases, pool = corpus
    model = simulated_generator(bias=0.4, saturation=6)
    retrieve = lexical_retriever(pool)
    return [
        position_sensitivity(model, cases, pool, sizes=(6, 12), positions=(0, 0.5, 1)),
        k_knee(model, cases, retrieve, ks=(2, 6)),
        ablation(model, cases, retrieve, fields=("title", "score")),
    ]


@pytest.fixture(scope="module")
def position(results: list[Result]) -> PositionResult:
    assert isinstance(results[0], PositionResult)
    return results[0]


def test_str_prints_the_table_with_n_noise_floor_and_interval(position: PositionResult) -> None:
    lines = str(position).splitlines()
    assert lines[0].startswith("Position sensitivity")
    assert lines[1].split() == ["sources", "at", "0", "at", "0.5", "at", "1", "spread"]
    assert lines[3].startswith("6 ")
    assert "n = 8 cases per cell; noise floor 1/n = 0.125" in lines[5]
    assert "bootstrap 95% interval (2,000 resamples, seed 0)" in lines[5]


def test_str_shows_each_cell_with_its_interval(position: PositionResult) -> None:
    low, high = position.interval(12, 0.5)
    assert f"{position.score(12, 0.5):.2f} [{low:.2f}, {high:.2f}]" in str(position)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_table_is_a_rich_table_of_the_same_rows(results: list[Result], index: int) -> None:
    result = results[index]
    console = Console(file=io.StringIO(), width=200)
    console.print(result.table())
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert result.title in text
    assert "noise floor 1/n = 0.125" in text


def test_table_without_rich_says_how_to_install(
    position: PositionResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rich.table", None)
    with pytest.raises(ImportError, match=r"table\(\) needs rich: pip install 'ctxbudget\[eval\]'"):
        position.table()
    assert str(position)  # the plain table needs nothing


@pytest.mark.parametrize("index", [0, 1, 2])
def test_to_dict_holds_the_cells_and_how_they_were_made(results: list[Result], index: int) -> None:
    data = results[index].to_dict()
    assert data["n"] == 8
    assert data["noise_floor"] == 0.125
    assert data["interval"] == {
        "level": 0.95,
        "method": "percentile bootstrap",
        "resamples": 2_000,
    }
    assert data["settings"]["model"] == "simulated(bias=0.4, saturation=6, seed=0)"
    assert all(c["low"] <= c["score"] <= c["high"] for c in data["cells"])
    assert all(c["n"] == 8 and c["noise_floor"] == 0.125 for c in data["cells"])


def test_json_round_trips_and_is_written(position: PositionResult, tmp_path: Path) -> None:
    path = tmp_path / "position.json"
    text = position.to_json(path)
    assert json.loads(text) == json.loads(path.read_text(encoding="utf-8")) == position.to_dict()


def test_csv_has_one_row_per_cell(position: PositionResult, tmp_path: Path) -> None:
    path = tmp_path / "position.csv"
    rows = list(csv.DictReader(io.StringIO(position.to_csv(path))))
    assert path.read_text(encoding="utf-8") == position.to_csv()
    assert len(rows) == 6
    assert list(rows[0]) == [
        "size", "position", "source", "n", "score", "low", "high", "noise_floor",
    ]  # fmt: skip
    assert (rows[4]["size"], rows[4]["position"], rows[4]["source"]) == ("12", "0.5", "7")


@pytest.mark.parametrize("index", [0, 1, 2])
def test_plot_saves_a_png(results: list[Result], index: int, tmp_path: Path) -> None:
    path = results[index].plot(tmp_path / "result.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install(
    position: PositionResult, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(
        ImportError, match=r"plot\(\) needs matplotlib: pip install 'ctxbudget\[plot"
    ):
        position.plot(tmp_path / "result.png")
