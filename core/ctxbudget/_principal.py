"""Which principal a framework call is answered for: the component's own, or the call's.

A framework component learns who is asking from the call (a LangChain config, a
LlamaIndex context variable) or is built for one principal. The two never mix, because
a default that a call may override is exactly what a call whose principal got lost (a
worker thread, a framework that drops the config) would fall back to. Both adapters
decide through `principal_for_call`.
"""

from __future__ import annotations

import enum
from typing import Final, Literal

from ctxbudget._errors import InputError
from ctxbudget._inputs import Principal

__all__ = ["NO_SCOPE", "NoScope", "principal_for_call"]


class NoScope(enum.Enum):
    """The type of `NO_SCOPE`."""

    NO_SCOPE = "NO_SCOPE"

    def __repr__(self) -> str:
        return "NO_SCOPE"


NO_SCOPE: Final = NoScope.NO_SCOPE
"""The call names no principal (as opposed to naming None, the anonymous caller)."""

Scope = Principal | None | Literal[NoScope.NO_SCOPE]


def principal_for_call(fixed: Principal | None, scope: Scope, *, where: str) -> Principal | None:
    """Who a call is answered for.

    A component built for one principal (`fixed`) serves that principal only: a call
    naming anyone else (None, the anonymous caller, included) is refused, since the
    caller meant someone else. A component built without one takes the call's `scope`;
    when the call names nobody (`NO_SCOPE`), it answers for nobody, which sees only
    unrestricted chunks (and is refused where `AccessPolicy.require_principal` is set).

    Args:
        where: how the call names its principal, for the error (e.g. ``as_principal``).
    """
    if fixed is not None and not isinstance(fixed, Principal):
        raise InputError(
            f"principal= must be a ctxbudget.Principal or None, but got {type(fixed).__name__}"
        )
    if scope is not NO_SCOPE and scope is not None and not isinstance(scope, Principal):
        # Refused here, before anything compares or keeps it: a framework config may carry a
        # dict or a str where the principal belongs.
        raise InputError(
            f"{where} names a {type(scope).__name__}, not a ctxbudget.Principal: pass "
            "Principal(tenant=..., groups=...), or None for an anonymous caller"
        )
    if fixed is None:
        return None if scope is NO_SCOPE else scope
    if scope is NO_SCOPE or scope == fixed:
        return fixed
    raise InputError(
        f"{where} names {scope!r}, but this component was built for {fixed!r} (principal=) "
        "and serves it only; build it without principal= to take who is asking from each "
        "call"
    )
