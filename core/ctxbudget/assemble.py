"""`ContextAssembler`: everything between the retriever's chunks and the string the model reads."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ctxbudget._claims import ListClaim, text_claim
from ctxbudget._fit import Fit
from ctxbudget.allocate import Allocated, allocate
from ctxbudget.budget import Budget, Claimant
from ctxbudget.conflicts import ConflictPolicy
from ctxbudget.dedup import Dedup
from ctxbudget.errors import ContextBudgetError, InputError
from ctxbudget.escalate import DocumentLoader, Escalation
from ctxbudget.fence import SourceFormat, fence_rule
from ctxbudget.history import HistoryClaim
from ctxbudget.inputs import Chunk, Principal, Tool, Turn, check_text
from ctxbudget.layout import FRAMES, ORDER, PREFIX, SECTION_SEPARATOR
from ctxbudget.order import Order
from ctxbudget.permit import AccessPolicy, permitted
from ctxbudget.prefix import prefix_hash, volatile_parts
from ctxbudget.render import RenderOptions
from ctxbudget.report import Dropped, DropReason, Report
from ctxbudget.result import Assembled, Source
from ctxbudget.select import RetrievedClaim, SourceSettings, rank
from ctxbudget.tokens import TokenCounter, Tokenizer, get_tokenizer
from ctxbudget.tools import tools_claim

__all__ = ["ContextAssembler"]

logger = logging.getLogger("ctxbudget")


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
        order: Order = "by_document",
        source_format: SourceFormat = "markdown",
        dedup: Dedup | None = None,
        min_relevance: float | None = None,
        stale_after: timedelta | None = timedelta(days=365),
        conflict_policy: ConflictPolicy | None = None,
        datamark: bool = False,
        fence_rule: bool = True,
        access: AccessPolicy | None = None,
        loader: DocumentLoader | None = None,
        escalation: Escalation | None = None,
        cache_size: int = 16_384,
    ) -> None:
        """
        Args:
            tokenizer: the model's tokenizer: a model or tiktoken encoding name, or any
                `Tokenizer` (see `CallableTokenizer`, `HuggingFaceTokenizer`).
            budget: defaults to `Budget.default()`.
            order: where kept sources stand; see `ctxbudget.order.arrange`.
            source_format: "markdown" headers (``[n] Title — A > B``) or "xml" tags.
            dedup: near-duplicate thresholds; defaults to `Dedup()`. Pass
                ``Dedup(jaccard=None, containment=None, cosine=None)`` to turn it off.
            min_relevance: drop chunks whose rerank score (else score) is below this.
            stale_after: sources not updated for longer get a freshness note; None: never.
            conflict_policy: how the model should treat sources whose effective dates
                differ; when set, those dates are shown.
            datamark: interleave a marker in retrieved text (Spotlighting).
            fence_rule: append the untrusted-data rule to the system prompt.
            access: which ACL metadata chunks must carry; defaults to none required.
            loader: loads whole documents for escalation; None turns escalation off.
            escalation: when a document is sent whole; defaults to `Escalation()`.
            cache_size: how many texts' token counts to remember across requests.
        """
        if isinstance(tokenizer, str):
            tokenizer = get_tokenizer(tokenizer)
        elif not isinstance(tokenizer, Tokenizer):
            raise TypeError(
                f"tokenizer must be a model/encoding name or a Tokenizer, not "
                f"{type(tokenizer).__name__}; wrap a function in CallableTokenizer(fn, name=...)"
            )
        if loader is not None and not isinstance(loader, DocumentLoader):
            raise TypeError(
                f"loader must have a load(document_id) -> Chunk | None method; got "
                f"{type(loader).__name__}"
            )
        self.budget = Budget.default() if budget is None else budget
        self.options = _Options(
            order=order,
            source_format=source_format,
            dedup=Dedup() if dedup is None else dedup,
            min_relevance=min_relevance,
            stale_after=stale_after,
            conflict_policy=conflict_policy,
            datamark=datamark,
            fence_rule=fence_rule,
            access=AccessPolicy() if access is None else access,
            escalation=Escalation() if escalation is None else escalation,
        )
        self.loader = loader
        self.counter = TokenCounter(tokenizer, maxsize=cache_size)

    def assemble(
        self,
        *,
        question: str,
        system: str | None = None,
        chunks: Sequence[Chunk] = (),
        history: Sequence[Turn] = (),
        tools: Sequence[Tool] = (),
        examples: str | None = None,
        memory: str | None = None,
        principal: Principal | None = None,
        now: datetime | None = None,
    ) -> Assembled:
        """Build one prompt. Raises `ContextBudgetError` when a floor or a priority-0 part
        cannot fit; everything left out otherwise is listed in `report.dropped`.

        Args:
            question: the user's original question, sent once, last.
            principal: who is asking; chunks they may not see never enter the prompt.
            now: the reference time for freshness notes; defaults to the current time.
        """
        question = _required_text("question", question)
        system = _text("system", system)
        examples = _text("examples", examples)
        memory = _text("memory", memory)
        chunks = _items("chunks", chunks, Chunk)
        history = _items("history", history, Turn)
        tools = _items("tools", tools, Tool)
        if principal is not None and not isinstance(principal, Principal):
            raise InputError(
                f"principal must be a ctxbudget.Principal, but got {type(principal).__name__}"
            )
        if system is not None and self.options.fence_rule:
            system = f"{system}{SECTION_SEPARATOR}{fence_rule(datamarked=self.options.datamark)}"

        given: dict[Claimant, bool] = {
            "system": bool(system),
            "question": True,
            "retrieved": bool(chunks),
            "examples": bool(examples),
            "tools": bool(tools),
            "history": bool(history),
            "memory": bool(memory),
        }
        for name, present in given.items():
            if present and self.budget.allocation(name) is None:
                raise InputError(
                    f"{_INPUT_NAME[name]} given but the budget has no {name!r} allocation; add "
                    f"Allocation({name!r}, max=..., priority=...) to the budget or leave it out"
                )

        pre_dropped, candidates = self._candidates(chunks, principal)
        by_id = {c.id: c for c in chunks}
        settings = SourceSettings(
            render=RenderOptions(
                fmt=self.options.source_format,
                stale_after=self.options.stale_after,
                now=now or datetime.now(UTC),
            ),
            order=self.options.order,
            dedup=self.options.dedup,
            conflict_policy=self.options.conflict_policy,
            datamark=self.options.datamark,
            access=self.options.access,
            principal=principal,
            loader=self.loader,
            escalation=self.options.escalation,
            withheld=frozenset(
                by_id[d.id].document_id for d in pre_dropped if d.reason == "forbidden"
            ),
        )
        claims = self._claims(
            settings=settings,
            system=system,
            question=question,
            candidates=candidates,
            history=history,
            tools=tools,
            examples=examples,
            memory=memory,
        )
        allocated = allocate(list(claims.values()), self.budget.available)
        _require_whole_strings(claims, allocated)
        fits, sections, total, final_drops = self._render_within_budget(claims, allocated)
        return self._result(claims, fits, sections, total, final_drops, allocated, pre_dropped)

    def _claims(
        self,
        *,
        settings: SourceSettings,
        system: str | None,
        question: str,
        candidates: list[Chunk],
        history: Sequence[Turn],
        tools: Sequence[Tool],
        examples: str | None,
        memory: str | None,
    ) -> dict[Claimant, ListClaim[Any]]:
        claims: dict[Claimant, ListClaim[Any]] = {}
        counter = self.counter
        for allocation in self.budget.by_priority():
            name = allocation.name
            if name == "retrieved":
                claims[name] = RetrievedClaim(
                    allocation, candidates, counter=counter, settings=settings
                )
            elif name == "history":
                claims[name] = HistoryClaim(allocation, history, counter=counter)
            elif name == "tools":
                claims[name] = tools_claim(allocation, tools, counter=counter)
            else:
                text = {
                    "system": system,
                    "question": question,
                    "examples": examples,
                    "memory": memory,
                }[name]
                claims[name] = text_claim(allocation, text, counter=counter, frame=FRAMES[name])
        return claims

    def _candidates(
        self, chunks: list[Chunk], principal: Principal | None
    ) -> tuple[list[Dropped], list[Chunk]]:
        """Ranked chunks worth considering, and the ones ruled out before selection.

        Permission runs first, before anything reads the text: a forbidden chunk is
        reported by id and never looked at again.
        """
        seen: set[str] = set()
        dropped: list[Dropped] = []
        usable: list[Chunk] = []
        floor = self.options.min_relevance
        for chunk in chunks:
            if chunk.id in seen:
                raise InputError(
                    f"chunk id {chunk.id!r} is given twice; ids must be unique within a request "
                    "(reports and sources refer to chunks by id)"
                )
            seen.add(chunk.id)
            reason: DropReason | None = None
            if not permitted(chunk, principal, self.options.access):
                reason = "forbidden"
            elif not chunk.content.strip():
                reason = "empty"
            elif floor is not None and (relevance := _relevance(chunk)) is not None:
                reason = "below_floor" if relevance < floor else None
            if reason is None:
                usable.append(chunk)
            else:
                dropped.append(Dropped.trusted("retrieved", "chunk", chunk.id, reason))
        return dropped, rank(usable)

    def _render_within_budget(
        self, claims: dict[Claimant, ListClaim[Any]], allocated: Allocated
    ) -> tuple[dict[Claimant, Fit[Any]], dict[Claimant, str], int, int]:
        """Render, count the final string exactly, and drop items until it is within budget.

        Estimates add up per-part counts; BPE can merge differently across joins, so
        the exact count of the final string is what is checked. When it is over, the
        least preferred item of the lowest-priority claimant that stays at or above its
        floor goes, and we count again. Floors hold here too: when no claimant can
        give up an item without falling below its floor, the request fails.
        """
        limit = self.budget.available
        fits = dict(allocated.fits)
        drops = 0
        shrink_order = sorted(
            (c for c in claims.values() if c.allocation.priority > 0),
            key=lambda c: c.allocation.priority,
            reverse=True,
        )
        while True:
            sections = {name: claims[name].render(fits[name]) for name in ORDER if name in claims}
            text = SECTION_SEPARATOR.join(s for s in sections.values() if s)
            total = self.counter.count(text)
            if total <= limit:
                return fits, sections, total, drops
            blocked: ListClaim[Any] | None = None
            for claim in shrink_order:
                name = claim.allocation.name
                smaller = claim.shrink(fits[name])
                if smaller is None:
                    continue
                if smaller.cost < allocated.floors[name]:
                    blocked = blocked or claim
                    continue
                fits[name] = smaller
                drops += 1
                break
            else:
                raise _over_after_join(claims, fits, blocked, total, limit)

    def _result(
        self,
        claims: dict[Claimant, ListClaim[Any]],
        fits: dict[Claimant, Fit[Any]],
        sections: dict[Claimant, str],
        total: int,
        final_drops: int,
        allocated: Allocated,
        pre_dropped: list[Dropped],
    ) -> Assembled:
        prefix = tuple(sections[n] for n in ORDER if n in PREFIX and sections.get(n))
        prefix_text = SECTION_SEPARATOR.join(prefix)
        warnings = tuple(
            w
            for n in ORDER
            if n in PREFIX and sections.get(n)
            for w in volatile_parts(n, sections[n])
        )
        dropped = list(pre_dropped)
        for name in ORDER:
            if name in claims:
                dropped.extend(claims[name].drops(fits[name]))

        history_claim = claims.get("history")
        history = (
            tuple(history_claim.messages(fits["history"]))
            if isinstance(history_claim, HistoryClaim)
            else ()
        )
        tail = SECTION_SEPARATOR.join(
            sections[n] for n in ("memory", "retrieved", "question") if sections.get(n)
        )
        retrieved = claims.get("retrieved")
        sources: tuple[Source, ...] = ()
        escalated = None
        if isinstance(retrieved, RetrievedClaim):
            fit = fits["retrieved"]
            sources = tuple(
                Source(
                    n=n,
                    chunk=chunk,
                    document=retrieved.is_document(chunk),
                    covers=retrieved.covered(chunk) if retrieved.is_document(chunk) else (),
                )
                for n, chunk in enumerate(retrieved.sources(fit), 1)
            )
            escalated = retrieved.escalated(fit)
        tools_kept = tuple(claims["tools"].kept(fits["tools"])) if "tools" in claims else ()

        squeezed = allocated.squeezed.get("retrieved", False)
        report = Report(
            budget=self.budget.available,
            total=total,
            unused=self.budget.available - total,
            sizes={n: fits[n].cost for n in ORDER if n in fits},
            granted=dict(allocated.granted),
            trimmed=tuple(n for n in ORDER if n in fits and fits[n].overflow),
            dropped=tuple(dropped),
            retrieval_trimmed=squeezed,
            squeezed_by=allocated.holders.get("retrieved", {}),
            escalated=escalated,
            prefix_tokens=self.counter.count(prefix_text),
            prefix_hash=prefix_hash(prefix_text),
            prefix_warnings=warnings,
            final_check_drops=final_drops,
        )
        _log(report, self.budget)
        return Assembled(
            text=SECTION_SEPARATOR.join(s for s in sections.values() if s),
            prefix=prefix,
            history=history,
            tail=tail,
            sources=sources,
            tools=tools_kept,
            report=report,
        )


_INPUT_NAME: dict[Claimant, str] = {
    "system": "a system prompt was",
    "question": "a question was",
    "retrieved": "chunks were",
    "examples": "examples were",
    "tools": "tools were",
    "history": "history was",
    "memory": "memory was",
}


def _text(name: str, value: object) -> str | None:
    """An optional text input, validated; "" counts as absent."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError(f"{name} must be a str or None, but got {type(value).__name__}")
    try:
        return check_text(value) if value else None
    except ValueError as exc:
        raise InputError(f"{name} {exc}") from None


def _required_text(name: str, value: object) -> str:
    text = _text(name, value)
    if text is None or not text.strip():
        raise InputError(f"{name} must be a non-empty str, but got {value!r}")
    return text


def _items(name: str, values: object, kind: type[Any]) -> list[Any]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise InputError(
            f"{name} must be a sequence of {kind.__name__}, but got {type(values).__name__}"
        )
    for index, value in enumerate(values):
        if not isinstance(value, kind):
            raise InputError(
                f"{name}[{index}] is a {type(value).__name__}, expected ctxbudget.{kind.__name__}; "
                f"build it with {kind.__name__}(...) or {kind.__name__}.model_validate(data)"
            )
    return list(values)


def _require_whole_strings(claims: dict[Claimant, ListClaim[Any]], allocated: Allocated) -> None:
    """A required string claimant (examples with a min, say) that did not fit whole is an error.

    Strings are never cut, so for them a floor can only mean "required": dropping the
    examples quietly because they outgrew their max would degrade every answer unseen.
    """
    for name, claim in claims.items():
        a = claim.allocation
        required = a.required and claim.packer.kind == "text" and bool(claim.items)
        if required and not allocated.fits[name].parts:
            raise ContextBudgetError(
                name,
                claim.content_cost(),
                allocated.granted[name],
                f"it is kept whole or not at all, and its min ({a.min}) makes it required; "
                "raise its max (and the total) or shorten it",
            )


def _over_after_join(
    claims: dict[Claimant, ListClaim[Any]],
    fits: dict[Claimant, Fit[Any]],
    blocked: ListClaim[Any] | None,
    total: int,
    limit: int,
) -> ContextBudgetError:
    """The error when the exact count is over and nothing above a floor is left to drop."""
    over = total - limit
    if blocked is not None:
        a = blocked.allocation
        held = fits[a.name].cost
        return ContextBudgetError(
            a.name,
            held,
            max(held - over, 0),
            f"the exact count of the joined prompt ({total:,}) is {over:,} over the budget, and "
            f"{a.name} cannot give up another item without falling below its floor "
            f"(min={a.min}); lower its min, raise the budget total, or shorten the other parts",
        )
    fixed = "+".join(c for c in claims if claims[c].allocation.priority == 0)
    return ContextBudgetError(
        fixed,
        total,
        limit,
        "the never-trimmed parts alone exceed the budget once joined; raise the budget total "
        "or shorten them",
    )


def _relevance(chunk: Chunk) -> float | None:
    return chunk.rerank_score if chunk.rerank_score is not None else chunk.score


class _Options(BaseModel):
    """The assembler's options, validated once at construction."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="ContextAssembler")

    order: Order
    source_format: SourceFormat
    dedup: Dedup
    min_relevance: float | None = Field(allow_inf_nan=False)
    stale_after: timedelta | None
    conflict_policy: ConflictPolicy | None
    datamark: bool
    fence_rule: bool
    access: AccessPolicy
    escalation: Escalation


def _capped(report: Report, budget: Budget) -> list[tuple[Claimant, int, int]]:
    """Claimants that left items out at their own max while most of the budget went unused.

    That is a budget sized for a smaller window (the default caps on a 1M-token model):
    worth a warning naming the cap, since nothing else in the request was short of space.
    """
    if report.unused * 2 <= report.budget:
        return []
    left_out = Counter(
        d.claimant for d in report.dropped if d.reason in ("over_budget", "oversize")
    )
    capped = []
    for name, count in left_out.items():
        a = budget.allocation(name)
        if a is not None and a.max is not None and report.granted.get(name) == a.max:
            capped.append((name, count, a.max))
    return capped


def _log(report: Report, budget: Budget) -> None:
    for name, count, cap in _capped(report, budget):
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
        holders = ", ".join(f"{name} {tokens:,}" for name, tokens in report.squeezed_by.items())
        logger.warning(
            "retrieval squeezed to %s tokens by other claimants (%s)",
            f"{report.granted.get('retrieved', 0):,}",
            holders,
            extra={"ctxbudget_squeeze": dict(report.squeezed_by)},
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
