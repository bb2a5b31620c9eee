"""The instrumentation events: named for LlamaIndex's serialisation, dispatched to handlers."""

from __future__ import annotations

import pytest
from llama_index.core.instrumentation.events import BaseEvent

from ctxbudget import Dropped
from llamaindex_ctxbudget import ContextPackedEvent, SourcesSelectedEvent
from llamaindex_ctxbudget.events import dispatcher


def test_event_class_names() -> None:
    assert SourcesSelectedEvent.class_name() == "SourcesSelectedEvent"
    assert ContextPackedEvent.class_name() == "ContextPackedEvent"


def test_events_reach_root_handlers_and_dump_with_their_name(events: list[BaseEvent]) -> None:
    dispatcher.event(ContextPackedEvent(space=10, numbers=[[2, 1]], untrusted=[1], tokens=[8]))
    [event] = events
    assert event.model_dump()["class_name"] == "ContextPackedEvent"
    assert event.model_dump()["numbers"] == [[2, 1]]


def test_sources_selected_event_carries_ids_and_reasons(events: list[BaseEvent]) -> None:
    dropped = Dropped(claimant="retrieved", kind="chunk", id="n9", reason="oversize")
    dispatcher.event(
        SourcesSelectedEvent(
            tokens=8, budget=10, sources=["n1"], dropped=[dropped], escalated=None, trimmed=True
        )
    )
    [event] = events
    assert event.model_dump()["dropped"][0]["id"] == "n9"


def test_context_packed_event_pieces_warns_and_is_numbers() -> None:
    event = ContextPackedEvent(space=10, numbers=[[2, 1]], untrusted=[1], tokens=[8])
    with pytest.warns(DeprecationWarning, match=r"ContextPackedEvent\.pieces is deprecated"):
        assert event.pieces is event.numbers
