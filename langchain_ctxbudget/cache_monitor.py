"""`CacheMonitorHandler`: a callback handler that feeds a `ctxbudget.CacheMonitor` from a run.

Each chat model's `usage_metadata` is paired with the report of the ctxbudget component
(runnable or agent middleware) that built its prompt: the latest report event in the same
top-level run.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import LLMResult

from ctxbudget import CacheMonitor
from langchain_ctxbudget._langchain import REPORT_EVENT

__all__ = ["CacheMonitorHandler"]


class CacheMonitorHandler(BaseCallbackHandler):
    """Feeds `monitor` each model reply's usage with the report of the prompt it answered.

    >>> from ctxbudget import CacheMonitor
    >>> handler = CacheMonitorHandler(CacheMonitor(deploy="v1"))
    >>> # chain.invoke(question, config={"callbacks": [handler]})
    """

    # Report and reply arrive in order on the caller's path, also in async runs.
    run_inline = True

    def __init__(self, monitor: CacheMonitor) -> None:
        if not isinstance(monitor, CacheMonitor):
            raise TypeError(f"monitor must be a CacheMonitor, not {type(monitor).__name__}")
        self.monitor = monitor
        self._lock = threading.Lock()
        self._parents: dict[UUID, UUID | None] = {}
        self._reports: dict[UUID, Mapping[str, Any]] = {}

    def _start(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self._parents[run_id] = parent_run_id

    def _root(self, run_id: UUID) -> UUID:
        parent = self._parents.get(run_id)
        while parent is not None:
            run_id, parent = parent, self._parents.get(parent)
        return run_id

    def _end(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        if parent_run_id is not None:
            return
        with self._lock:  # the top-level run ended: forget it and its children
            roots = {run: self._root(run) for run in self._parents}
            for run, root in roots.items():
                if root == run_id:
                    del self._parents[run]
            self._reports.pop(run_id, None)

    def on_chain_start(
        self,
        serialized: dict[str, Any],
        inputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._start(run_id, parent_run_id)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        # A selection's report has no prefix: only an assembly's says what could be cached.
        if name == REPORT_EVENT and isinstance(data, Mapping) and "prefix_hash" in data:
            with self._lock:
                self._reports[self._root(run_id)] = data

    def on_llm_end(
        self,
        response: LLMResult,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        with self._lock:
            report = self._reports.get(self._root(run_id))
        if report is None:
            return
        for generations in response.generations:
            for generation in generations:
                message = getattr(generation, "message", None)
                if isinstance(message, AIMessage) and message.usage_metadata is not None:
                    self.monitor.observe(message, report)
        self._end(run_id, parent_run_id)

    def on_chain_end(
        self,
        outputs: dict[str, Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._end(run_id, parent_run_id)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._end(run_id, parent_run_id)
