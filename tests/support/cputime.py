"""CPU-time comparisons for the tests that check a cost grows no faster than it should.

Process time, not wall time, and two inputs measured in alternation, so whatever else
slows the machine slows both: the tests assert on a ratio, never on seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

SIZE = 16_000
"""Characters of the smaller text; the larger is four times as long."""

MAX_RATIO = 20.0
"""How much slower a hostile input of the same size may be than an ordinary one."""
MAX_GROWTH = 8.0
"""How much longer four times the input may take (linear: about 4)."""

ORDINARY_ASCII = (
    "Refunds take 14 days from delivery: see [3] and the table below. If a < b, "
    "the customer keeps the item. Note: gift cards are final [12].\n"
)
"""Ordinary ASCII prose: what a hostile input of the same size is timed against."""


def fill(unit: str, size: int) -> str:
    """`unit` repeated to `size` characters."""
    return (unit * (size // len(unit) + 1))[:size]


def calls_for(function: Callable[[T], object], text: T) -> int:
    """How many calls of `function(text)` take 2 ms at least, so a timer tick is noise."""
    calls = 1
    while True:
        start = time.process_time()
        for _ in range(calls):
            function(text)
        if time.process_time() - start >= 0.002:
            return calls
        calls *= 4


def paired_times(function: Callable[[T], object], first: T, second: T) -> tuple[float, float]:
    """The best per-call CPU times of `function` on `first` and on `second`, measured in
    alternation (so whatever slows the process slows both), garbage collector off."""
    counts = (calls_for(function, first), calls_for(function, second))
    best = [float("inf"), float("inf")]
    gc.disable()
    try:
        for _ in range(5):
            for slot, (text, calls) in enumerate(zip((first, second), counts, strict=True)):
                start = time.process_time()
                for _ in range(calls):
                    function(text)
                best[slot] = min(best[slot], (time.process_time() - start) / calls)
    finally:
        gc.enable()
    return best[0], best[1]
