"""The instrumentation events: named for LlamaIndex's serialisation, dispatched to handlers."""

from __future__ import annotations

from llama_index.core.instrumentation.events import BaseEvent

from ctxbudget import Dropped
from llamaindex_ctxbudget import ContextPackedEvent, SourcesSelectedEvent
from llamaindex_ctxbudget.events import dispatcher


def test_event_class_names() -> None:
    assert SourcesSelectedEvent.class_name() == "SourcesSelectedEvent"
    assert ContextPackedEvent.class_name() == "ContextPackedEvent"


def test_events_reach_root_handlers_and_dump_with_their_name(events: list[BaseEvent]) -> None:
    dropped = Dropped(claimant="retrieved", kind="chunk", id="n9", reason="oversize")
    dispatcher.event(ContextPackedEvent(space=10, pieces=[["n1"]], tokens=[8], dropped=[dropped]))
    [event] = events
    assert event.model_dump()["class_name"] == "ContextPackedEvent"
    assert event.model_dump()["dropped"][0]["id"] == "n9"
