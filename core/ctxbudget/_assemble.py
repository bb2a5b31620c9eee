"""`ContextAssembler`: everything between the retriever's chunks and the string the model reads."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from ctxbudget._allocate import Allocated
from ctxbudget._arguments import check_int, check_optional, check_type, sequence_of, wrong_type
from ctxbudget._budget import Budget
from ctxbudget._claimants import Claimant
from ctxbudget._claims import Claim, text_claim
from ctxbudget._conversation import HistoryOptions, Summarize, SummaryCache
from ctxbudget._errors import InputError
from ctxbudget._exact import Rendered, settle
from ctxbudget._fence import fence_rule
from ctxbudget._history import HistoryClaim
from ctxbudget._inputs import Chunk, Principal, Tool, Turn
from ctxbudget._layout import FRAMES, PREFIX, SECTION_ORDER, SECTION_SEPARATOR, SECTIONS
from ctxbudget._neutralise import neutralise_section
from ctxbudget._otel import traced_entry
from ctxbudget._prefix import prefix_hash, volatile_parts
from ctxbudget._provider import FinalCount, ProviderCount, count_with_provider
from ctxbudget._report import Dropped, DropRun, Report
from ctxbudget._result import Assembled
from ctxbudget._sources.permit import check_principal
from ctxbudget._sources.pipeline import (
    SourceOptions,
    check_chunks,
    retrieved_claim,
    source_options,
)
from ctxbudget._sources.render import HeaderCache, header_cache
from ctxbudget._standalone import (
    FenceMode,
    Selection,
    TrimmedHistory,
    history_options,
    select_with,
    trim_with,
)
from ctxbudget._text import check_text
from ctxbudget._textcache import ShingleCache, TextCache, shingle_cache
from ctxbudget._tokens import (
    CountCache,
    Tokenizer,
    get_tokenizer,
    tokenizer_of,
)
from ctxbudget._tools import tool_schema, tools_claim

__all__ = ["ContextAssembler"]

logger = logging.getLogger("ctxbudget")

_GIVEN: dict[Claimant, str] = {s.name: s.given for s in SECTIONS}


class ContextAssembler:
    """Builds prompts under a hard token budget. Reusable and thread-safe; build one per app.

    >>> assembler = ContextAssembler(budget=Budget.default(), tokenizer="gpt-4o")
    >>> result = assembler.assemble(system="Answer from the sources.", question="Why?")
    >>> result.report.total <= result.report.budget
    True
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer,
        budget: Budget | None = None,
        sources: SourceOptions | None = None,
        history: HistoryOptions | None = None,
        fence_rule: bool = True,
        native_tools: bool = False,
        cache_size: int = 16_384,
        provider_count: ProviderCount | None = None,
    ) -> None:
        """
        Args:
            tokenizer: the model's tokenizer: a model or tiktoken encoding name, or any
                `Tokenizer` (see `CallableTokenizer`, `HuggingFaceTokenizer`).
            budget: defaults to `Budget.default()`.
            sources: how retrieved sources are chosen and shown; defaults to `SourceOptions()`.
            history: how history makes room (tool-result clearing, summaries); defaults to
                `HistoryOptions()`.
            fence_rule: append the untrusted-data rule to the system prompt.
            native_tools: keep tools out of the text, for the provider's tools parameter
                (`Assembled.tool_schemas`); their schemas still count against the budget.
            cache_size: how many texts' token counts (and history summaries, chunk texts'
                5-word windows, neutralised texts and source headers: `shingle_cache`,
                `rewrite_cache`, `header_cache`) to remember across requests.
            provider_count: the provider's own count as the final check, one synchronous
                call per assembly (`AnthropicCount`, `BedrockCount`, `GeminiCount`;
                docs/tokenizers.md, "The provider's own count as the final check"); it goes
                with the model, as the tokenizer does.
        """
        self.model: str | None = None
        """The model the prompts are for, when `tokenizer` named one (not an encoding)."""
        if isinstance(tokenizer, str):
            name, tokenizer = tokenizer, get_tokenizer(tokenizer)
            self.model = None if name == tokenizer.name else name
        tokenizer = tokenizer_of(tokenizer)
        budget = check_optional(
            "budget",
            budget,
            Budget,
            "a Budget",
            "build it with Budget(total=..., allocations=[...]), Budget.for_model(...) or "
            "Budget.parse({...})",
        )
        if provider_count is not None and not isinstance(provider_count, ProviderCount):
            raise wrong_type(
                "provider_count",
                provider_count,
                "a ProviderCount",
                "pass AnthropicCount(client, model=...), BedrockCount(client, model_id=...) or "
                "GeminiCount(client, model=...)",
            )
        check_type("fence_rule", fence_rule, bool, "a bool")
        check_type("native_tools", native_tools, bool, "a bool")
        if check_int("cache_size", cache_size) < 0:
            raise InputError(f"cache_size must be an int >= 0, but got {cache_size}")
        self.provider_count = provider_count
        self.budget = Budget.default() if budget is None else budget
        self.sources = source_options("sources", sources)
        self.history = history_options("history", history)
        self._summaries = SummaryCache(cache_size)
        self.fence_rule = fence_rule
        self.native_tools = native_tools
        self.counter = CountCache(tokenizer, maxsize=cache_size)

    @property
    def shingle_cache(self) -> ShingleCache:
        """The chunk texts' 5-word windows (and text verdicts on pairs of them) this
        assembler remembers across requests for near-duplicate detection, at most
        `cache_size` texts: `.calls` counts the texts shingled, as `counter.calls` counts
        the texts tokenized."""
        return shingle_cache(self.counter)

    @property
    def rewrite_cache(self) -> TextCache[Any, str | None]:
        """The neutralised texts (chunk texts, turns, tools, memory) this assembler remembers
        across requests by the text's digest, at most `cache_size`: `.calls` counts the texts
        neutralised (a text neutralising leaves unchanged is held as None, no copy)."""
        return self.counter.rewrites

    @property
    def header_cache(self) -> HeaderCache:
        """The source headers this assembler remembers across requests by their number and
        the text of the fields they show, at most `cache_size`: `.calls` counts the headers
        rendered."""
        return header_cache(self.counter)

    @traced_entry("ctxbudget.assemble", model=attrgetter("model"))
    def assemble(
        self,
        *,
        question: str | None = None,
        system: str | None = None,
        chunks: Sequence[Chunk] = (),
        history: Sequence[Turn] = (),
        tools: Sequence[Tool] = (),
        examples: str | None = None,
        memory: str | None = None,
        principal: Principal | None = None,
        now: datetime | None = None,
        summarize: Summarize | None = None,
    ) -> Assembled:
        """Build one prompt. Raises `ContextBudgetError` when a floor, a priority-0 part or
        the history's latest unit cannot fit; everything left out otherwise is listed in
        `report.dropped`.

        Args:
            question: the user's original question, sent once, last. None continues the
                conversation in `history` (an agent's call after a tool result), which then
                ends with the user's message or tool results: the prompt has no question, the
                history's latest unit is always sent, and the messages end with it (or with
                memory and sources after it).
            principal: who is asking; chunks they may not see never enter the prompt.
            now: the reference time for freshness notes; defaults to the current time.
            summarize: for this call in place of `HistoryOptions.summarize` (docs/agents.md,
                "Summaries": how an async summariser takes part).
        """
        history = sequence_of("history", history, Turn)
        check_optional("now", now, datetime, "a datetime", "e.g. datetime.now(UTC)")
        if question is not None or not history:
            question = _required_text("question", question)
        elif history[-1].role == "assistant":
            raise InputError(
                f"question=None continues the conversation in history, which must then end with "
                f"what the model answers (the user's message or tool results), but "
                f"history[{len(history) - 1}] is an assistant turn; pass the user's next message "
                "as question=..., or leave that turn out"
            )
        elif not any(turn.content.strip() for turn in history):
            raise InputError(
                "question=None continues the conversation in history, but every history turn "
                "is blank, so there is nothing to send; pass question=..."
            )
        system = _text("system", system)
        examples = _text("examples", examples)
        # Memory is often derived from user data: it may not forge a frame, source or turn.
        memory = _text("memory", memory)
        memory = None if memory is None else self.counter.rewritten(memory, neutralise_section)
        chunks = check_chunks(chunks)
        tools = sequence_of("tools", tools, Tool)
        principal = check_principal(principal, self.sources.access)
        if system is not None and self.fence_rule:
            system = f"{system}{SECTION_SEPARATOR}{fence_rule(datamarked=self.sources.datamark)}"

        given: dict[Claimant, bool] = {
            "system": bool(system),
            "question": question is not None,
            "retrieved": bool(chunks),
            "examples": bool(examples),
            "tools": bool(tools),
            "history": bool(history),
            "memory": bool(memory),
        }
        for name, present in given.items():
            if present and self.budget.allocation(name) is None:
                raise InputError(
                    f"{_GIVEN[name]} given but the budget has no {name!r} allocation; add "
                    f"Allocation({name!r}, max=..., priority=...) to the budget or leave it out"
                )

        claims: dict[Claimant, Claim] = {}
        ruled_out: list[Dropped | DropRun] = []
        counter = self.counter
        texts = {"system": system, "question": question, "examples": examples, "memory": memory}
        for allocation in self.budget.by_priority():
            name = allocation.name
            if name == "retrieved":
                claims[name], ruled_out = retrieved_claim(
                    allocation,
                    chunks,
                    principal=principal,
                    options=self.sources,
                    counter=counter,
                    now=now,
                )
            elif name == "history":
                claims[name] = HistoryClaim(
                    allocation,
                    history,
                    counter=counter,
                    options=self.history,
                    summarize=summarize,
                    summaries=self._summaries,
                    keep_latest=question is None,
                )
            elif name == "tools":
                claims[name] = tools_claim(
                    allocation, tools, counter=counter, native=self.native_tools
                )
            else:
                claims[name] = text_claim(
                    allocation, texts[name], counter=counter, frame=FRAMES[name]
                )
        return self._run(claims, ruled_out)

    def _run(
        self, claims: Mapping[Claimant, Claim], ruled_out: list[Dropped | DropRun]
    ) -> Assembled:
        """The prompt `claims` make under the budget: allocated, counted exactly (and by the
        provider when one is set), checked by each claimant, and reported; `ruled_out` are
        the items left out before any claimant saw them."""
        available = self.budget.available
        allocated, rendered = settle(claims, available, self.counter)
        final = None
        if self.provider_count is not None:
            rendered, final = count_with_provider(
                self.provider_count,
                rendered,
                allocated,
                available,
                self.counter,
                lambda r: self._result(r, allocated, ruled_out, log=False),
            )
        for name, claim in claims.items():
            claim.require_sent(rendered.fits[name], allocated.granted[name])
        return self._result(rendered, allocated, ruled_out, final)

    @traced_entry("ctxbudget.select_sources", model=attrgetter("model"))
    def select_sources(
        self,
        chunks: Sequence[Chunk],
        *,
        max_tokens: int | None = None,
        min_tokens: int | None = None,
        principal: Principal | None = None,
        now: datetime | None = None,
        fence: FenceMode = "block",
    ) -> Selection:
        """Retrieved sources alone, numbered and fenced within `max_tokens` (docs/sources.md,
        "Retrieved sources on their own"): the assembler's own pipeline and options.

        `max_tokens` and `min_tokens` default to the budget's `retrieved` allocation
        (its max, capped by what the budget has available, and its min); `fence` as in
        `select_sources`.
        """
        self._refuse_part("select_sources")
        max_tokens, min_tokens = self._range("retrieved", max_tokens, min_tokens)
        return select_with(
            self.counter,
            chunks,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            principal=principal,
            sources=self.sources,
            now=now,
            fence=fence,
        )

    @traced_entry("ctxbudget.trim_history", model=attrgetter("model"))
    def trim_history(
        self,
        turns: Sequence[Turn],
        *,
        max_tokens: int | None = None,
        min_tokens: int | None = None,
        summarize: Summarize | None = None,
    ) -> TrimmedHistory:
        """Conversation turns alone, trimmed to `max_tokens` (docs/budget.md, "How each
        claimant shrinks"): the latest unit, the first, the most recent that fit, old tool results
        cleared first, gap markers (or summaries) between; the assembler's `HistoryOptions`.

        `max_tokens` and `min_tokens` default to the budget's `history` allocation;
        `summarize` as in `assemble`.
        """
        self._refuse_part("trim_history")
        max_tokens, min_tokens = self._range("history", max_tokens, min_tokens)
        return trim_with(
            self.counter,
            turns,
            max_tokens=max_tokens,
            min_tokens=min_tokens,
            history=self.history,
            summaries=self._summaries,
            summarize=summarize,
        )

    def _refuse_part(self, what: str) -> None:
        """Fail closed where the provider count cannot run: it measures a whole request, and
        `what` returns one part for a prompt the assembler never sees."""
        if self.provider_count is not None:
            raise InputError(
                f"{what} returns one part of a prompt, which the provider count "
                f"({self.provider_count.label}) cannot measure: it counts the whole request "
                "that assemble() builds; call assemble(), or use an assembler without "
                "provider_count for this part"
            )

    def _range(
        self, name: Claimant, max_tokens: int | None, min_tokens: int | None
    ) -> tuple[int, int]:
        """A single claimant's token range: as given, else its allocation's max (capped by
        what the budget has available) and min."""
        for option, value in (("max_tokens", max_tokens), ("min_tokens", min_tokens)):
            if value is not None:
                check_int(option, value)
        allocation = self.budget.allocation(name)
        if max_tokens is None:
            cap = None if allocation is None else allocation.max
            max_tokens = self.budget.available if cap is None else min(cap, self.budget.available)
        if min_tokens is None:
            min_tokens = 0 if allocation is None else min(allocation.min, max_tokens)
        return max_tokens, min_tokens

    def _result(
        self,
        rendered: Rendered,
        allocated: Allocated,
        ruled_out: list[Dropped | DropRun],
        final: FinalCount | None = None,
        *,
        log: bool = True,
    ) -> Assembled:
        """The result of `rendered`; `final` is the provider's final check when one was made
        (`log=False` for the prompts it counts on the way)."""
        claims, fits, sections = rendered.claims, rendered.fits, rendered.prefix
        prefix = tuple(sections[n] for n in SECTION_ORDER if n in PREFIX and sections.get(n))
        prefix_text = SECTION_SEPARATOR.join(prefix)
        warnings = tuple(
            w
            for n in SECTION_ORDER
            if n in PREFIX and sections.get(n)
            for w in volatile_parts(n, sections[n])
        )
        dropped = list(ruled_out)
        left_out: Counter[Claimant] = Counter()
        for name in SECTION_ORDER:
            if name in claims:
                fit = fits[name]
                dropped += claims[name].drop_runs(fit)
                left_out[name] = len(fit.unreached) + sum(
                    reason in ("over_budget", "oversize") for _, reason, _ in fit.dropped
                )
        # After every drop record: a history summary is asked for in the same order as ever.
        outcomes = [claims[n].outcome(fits[n]) for n in SECTION_ORDER if n in claims]
        entries = tuple(entry for o in outcomes for entry in o.entries)
        sources = tuple(source for o in outcomes for source in o.sources)
        escalated = next((o.escalated for o in outcomes if o.escalated is not None), None)
        tools_kept = tuple(tool for o in outcomes for tool in o.tools)
        tail = rendered.text[rendered.tail :]

        trimmed_by_others = allocated.trimmed_by_others.get("retrieved", False)
        method = self.counter.count_method if final is None else final.method
        total = rendered.total if final is None else final.total
        report = Report(
            budget=self.budget.available,
            total=total,
            unused=self.budget.available - total,
            sizes={n: fits[n].cost for n in SECTION_ORDER if n in fits},
            granted=dict(allocated.granted),
            trimmed=tuple(n for n in SECTION_ORDER if n in fits and fits[n].overflow),
            dropped=(),
            retrieval_trimmed=trimmed_by_others,
            trimmed_by=allocated.holders.get("retrieved", {}),
            escalated=escalated,
            tool_schema_tokens=rendered.outside,
            # Native tool schemas sit in the provider's cacheable prefix too.
            prefix_tokens=self.counter.count(prefix_text) + rendered.outside,
            prefix_hash=prefix_hash(
                "\n".join([prefix_text, *map(tool_schema, tools_kept)])
                if self.native_tools
                else prefix_text
            ),
            prefix_sections=_section_hashes(sections, tools_kept if self.native_tools else ()),
            prefix_warnings=warnings,
            final_check_drops=rendered.drops,
            cleared=tuple(record for o in outcomes for record in o.cleared),
            summaries=tuple(span for o in outcomes for span in o.summaries),
            count_exact=method.exact,
            count_method=None if method.exact and final is None else method.label,
            count_margin=method.margin,
            count_fallback=None if final is None else final.fallback,
        )._defer_dropped(dropped)
        if log:
            _log(report, self.budget, left_out)
        return Assembled(
            text=rendered.text,
            prefix=prefix,
            history=tuple((entry.role, entry.content) for entry in entries),
            history_turns=tuple(entry.position for entry in entries),
            cleared=tuple(e.position for e in entries if e.cleared and e.position is not None),
            tail=tail,
            sources=sources,
            tools=tools_kept,
            report=report,
        )


def _section_hashes(
    sections: Mapping[Claimant, str], native: Sequence[Tool]
) -> dict[Claimant, str]:
    """sha256 of each prefix section, the tools' by their schemas when sent natively."""
    hashes = {n: prefix_hash(sections[n]) for n in SECTION_ORDER if n in PREFIX and sections.get(n)}
    if native:
        hashes["tools"] = prefix_hash("\n".join(map(tool_schema, native)))
    return hashes


def _text(name: str, value: object) -> str | None:
    """An optional text input, validated; "" counts as absent."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise wrong_type(name, value, "a str or None")
    if not value:
        return None
    try:
        value.encode("utf-8")  # a C loop that fails exactly on lone surrogates
    except UnicodeEncodeError:
        try:
            check_text(value)  # names the first one
        except ValueError as exc:
            raise InputError(f"{name} {exc}") from None
    return value


def _required_text(name: str, value: object) -> str:
    text = _text(name, value)
    if text is None or not text.strip():
        hint = "" if value is not None else " (None only with history=..., to continue it)"
        raise InputError(f"{name} must be a non-empty str, but got {value!r}{hint}")
    return text


def _capped(
    report: Report, budget: Budget, left_out: Counter[Claimant]
) -> list[tuple[Claimant, int, int]]:
    """Claimants that left items out at their own max while most of the budget went unused.

    That is a budget sized for a smaller window (the default caps on a 1M-token model):
    worth a warning naming the cap, since nothing else in the request was short of space.
    `left_out` counts each claimant's over_budget and oversize drops.
    """
    capped = []
    for name, count in left_out.items():
        if not count:
            continue
        cap = budget.binding_cap(name, granted=report.granted.get(name, 0), used=report.total)
        if cap is not None:
            capped.append((name, count, cap))
    return capped


def _log(report: Report, budget: Budget, left_out: Counter[Claimant]) -> None:
    for name, count, cap in _capped(report, budget, left_out):
        logger.warning(
            "%s left out %s items at its max of %s tokens while %s of %s tokens were unused; "
            "raise its max, or size the budget to the model with Budget.for_model",
            name,
            f"{count:,}",
            f"{cap:,}",
            f"{report.unused:,}",
            f"{report.budget:,}",
            extra={"ctxbudget_capped": {"claimant": name, "max": cap, "left_out": count}},
        )
    if report.retrieval_trimmed:
        holders = ", ".join(f"{name} {tokens:,}" for name, tokens in report.trimmed_by.items())
        logger.warning(
            "retrieval trimmed to %s tokens by other claimants (%s)",
            f"{report.granted.get('retrieved', 0):,}",
            holders,
            extra={"ctxbudget_trimmed_by": dict(report.trimmed_by)},
        )
    for warning in report.prefix_warnings:
        logger.warning("volatile prompt-cache prefix: %s", warning)
    if logger.isEnabledFor(logging.INFO):  # the dump costs more than the log call
        logger.info(
            "assembled prompt: %s/%s tokens",
            f"{report.total:,}",
            f"{report.budget:,}",
            extra={"ctxbudget": report.model_dump(mode="json")},
        )
