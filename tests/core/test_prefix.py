"""The prefix lint scans a prefix once: repeated requests get the same warnings from memory."""

from __future__ import annotations

from ctxbudget._prefix import _volatile, volatile_parts


def test_volatile_parts_of_a_repeated_prefix_come_from_memory() -> None:
    _volatile.cache_clear()
    text = "Today is 2026-05-01. Answer from the sources."
    first = volatile_parts("system", text)
    again = volatile_parts("system", "".join(["Today is 2026-05-01.", " Answer from the sources."]))
    assert again == first
    assert _volatile.cache_info().hits == 1
    assert [w.split(" (")[0] for w in first] == [
        "system contains a date",
        "system contains a current-date phrase",
    ]


def test_volatile_parts_returns_a_list_of_its_own() -> None:
    first = volatile_parts("system", "At 10:30 each day.")
    first.clear()
    assert volatile_parts("system", "At 10:30 each day.") != []
