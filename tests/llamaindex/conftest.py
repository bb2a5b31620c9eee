"""LlamaIndex test fixtures: offline Settings (a recording LLM), captured events, no network.

Every test runs with the network refused (a download would fail loudly, not hang) and
with LlamaIndex's global Settings pointed at offline stand-ins, restored afterwards.
"""

from __future__ import annotations

import asyncio
import socket
import warnings
from collections.abc import Iterator
from typing import Any

import llama_index.core
import pytest
from llama_index.core import Settings
from llama_index.core.bridge.pydantic import Field
from llama_index.core.embeddings import MockEmbedding

# Re-exported by llama_index.core.instrumentation without an __all__, hence the ignore.
from llama_index.core.instrumentation import get_dispatcher  # type: ignore[attr-defined]
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from ctxbudget import TiktokenTokenizer
from tests.support.llamaindex_stack import RecordingLLM, recording_llm


class _Collector(BaseEventHandler):
    events: list[BaseEvent] = Field(default_factory=list)

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def events() -> Iterator[list[BaseEvent]]:
    """Events dispatched during the test, as a handler on the root dispatcher sees them."""
    collector = _Collector()
    root = get_dispatcher()
    root.add_event_handler(collector)
    yield collector.events
    root.event_handlers.remove(collector)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse internet connections: nothing may download (tokenizers, models, NLTK data)."""
    connect = socket.socket.connect

    def local_only(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise OSError(f"test tried to reach the network: {address!r}")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


@pytest.fixture(autouse=True)
def offline_settings(o200k: TiktokenTokenizer) -> Iterator[RecordingLLM]:
    """LlamaIndex's globals pointed at offline stand-ins for the test, then restored."""
    saved = (
        Settings._llm,
        Settings._embed_model,
        Settings._prompt_helper,
        llama_index.core.global_tokenizer,
    )
    llm = recording_llm()
    Settings.llm = llm
    Settings.embed_model = MockEmbedding(embed_dim=8)
    Settings.tokenizer = o200k.encoding.encode
    Settings._prompt_helper = None
    yield llm
    Settings._llm, Settings._embed_model, Settings._prompt_helper = saved[:3]
    llama_index.core.global_tokenizer = saved[3]


@pytest.fixture(autouse=True)
def no_event_loop_left_open() -> Iterator[None]:
    """Close the event loop a test leaves behind in this thread.

    LlamaIndex's sync paths run coroutines on ``asyncio.get_event_loop()``, which makes a
    loop for the main thread and leaves it open; a later ``asyncio.run`` drops it unclosed,
    and whichever test the garbage collector next runs in fails on its ResourceWarning.
    """
    yield
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            loop = asyncio.get_event_loop()
    except RuntimeError:
        return  # no loop in this thread
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
