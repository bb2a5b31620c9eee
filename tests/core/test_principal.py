"""Which principal a call is answered for (_principal.py): a component's fixed one, or the
call's own, never one standing in for the other; and the policy that requires one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import (
    NO_SCOPE,
    AccessPolicy,
    Chunk,
    ContextAssembler,
    InputError,
    Principal,
    SourceOptions,
    principal_for_call,
    select_sources,
)
from ctxbudget.types import NoScope
from tests.support.factories import budget_for

ACME = Principal(tenant="acme", groups=frozenset({"staff"}))
GLOBEX = Principal(tenant="globex", groups=frozenset({"staff"}))
CHUNKS = [
    Chunk(id="public", content="Opening hours: 9 to 5."),
    Chunk(id="acme", content="Acme pricing: 40 per seat.", tenant="acme"),
]
REQUIRED = SourceOptions(access=AccessPolicy(require_principal=True))


# --- principal_for_call ---------------------------------------------------------------------


def test_principal_for_call_without_fixed_takes_the_calls_principal() -> None:
    assert principal_for_call(None, GLOBEX, where="as_principal") is GLOBEX


def test_principal_for_call_without_fixed_takes_an_anonymous_call_as_anonymous() -> None:
    assert principal_for_call(None, None, where="as_principal") is None


def test_principal_for_call_without_fixed_or_scope_is_nobody() -> None:
    assert principal_for_call(None, NO_SCOPE, where="as_principal") is None


def test_principal_for_call_fixed_serves_a_call_naming_nobody() -> None:
    assert principal_for_call(ACME, NO_SCOPE, where="as_principal") is ACME


def test_principal_for_call_fixed_serves_an_equal_principal() -> None:
    same = Principal(tenant="acme", groups=frozenset({"staff"}))

    assert principal_for_call(ACME, same, where="as_principal") is ACME


def test_principal_for_call_fixed_refuses_another_principal() -> None:
    with pytest.raises(
        InputError,
        match=r"^config\['configurable'\]\['principal'\] names Principal\(tenant='globex', "
        r"groups=frozenset\(\{'staff'\}\)\), but this component was built for "
        r"Principal\(tenant='acme', groups=frozenset\(\{'staff'\}\)\) \(principal=\) and "
        r"serves it only; build it without principal= to take who is asking from each call$",
    ):
        principal_for_call(ACME, GLOBEX, where="config['configurable']['principal']")


def test_principal_for_call_fixed_refuses_an_anonymous_call() -> None:
    with pytest.raises(InputError, match=r"^as_principal names None, but this component was"):
        principal_for_call(ACME, None, where="as_principal")


def test_principal_for_call_fixed_refuses_the_same_tenant_with_other_groups() -> None:
    wider = Principal(tenant="acme", groups=frozenset({"staff", "board"}))

    with pytest.raises(InputError, match="but this component was built for"):
        principal_for_call(ACME, wider, where="as_principal")


@pytest.mark.parametrize("scope", [{"tenant": "acme"}, "acme", 1])
def test_principal_for_call_scope_that_is_not_a_principal_raises(scope: object) -> None:
    with pytest.raises(
        InputError,
        match=rf"^as_principal names a {type(scope).__name__}, not a ctxbudget\.Principal: pass "
        r"Principal\(tenant=\.\.\., groups=\.\.\.\), or None for an anonymous caller$",
    ):
        principal_for_call(None, scope, where="as_principal")  # type: ignore[arg-type]


def test_principal_for_call_fixed_that_is_not_a_principal_raises() -> None:
    with pytest.raises(
        InputError, match=r"^principal= must be a ctxbudget\.Principal or None, but got dict$"
    ):
        principal_for_call({"tenant": "acme"}, NO_SCOPE, where="as_principal")  # type: ignore[arg-type]


def test_no_scope_is_neither_none_nor_a_principal() -> None:
    assert NO_SCOPE is not None
    assert isinstance(NO_SCOPE, NoScope)
    assert repr(NO_SCOPE) == "NO_SCOPE"


PRINCIPALS = st.builds(
    Principal,
    tenant=st.sampled_from([None, "acme", "globex"]),
    groups=st.frozensets(st.sampled_from(["staff", "board"])),
)
SCOPES = st.one_of(st.just(NO_SCOPE), st.none(), PRINCIPALS)


@given(st.one_of(st.none(), PRINCIPALS), SCOPES)
def test_principal_for_call_never_answers_for_anyone_the_call_did_not_name(
    fixed: Principal | None, scope: Principal | NoScope | None
) -> None:
    named = fixed if scope is NO_SCOPE else scope
    if fixed is not None and named != fixed:
        with pytest.raises(InputError, match="serves it only"):
            principal_for_call(fixed, scope, where="as_principal")
    else:
        assert principal_for_call(fixed, scope, where="as_principal") == named


def test_principal_for_call_with_no_scope_sees_unrestricted_chunks_only() -> None:
    principal = principal_for_call(None, NO_SCOPE, where="as_principal")
    selection = select_sources(CHUNKS, max_tokens=500, tokenizer="o200k_base", principal=principal)

    assert [s.chunk.id for s in selection.sources] == ["public"]
    assert "Acme pricing" not in selection.text


# --- AccessPolicy(require_principal=True) ---------------------------------------------------

NO_PRINCIPAL = (
    r"^no principal was given, and the access policy requires one "
    r"\(AccessPolicy\(require_principal=True\)\): pass principal=Principal\(\.\.\.\) for the "
    r"user the request is for$"
)


def test_select_sources_requiring_a_principal_refuses_none() -> None:
    with pytest.raises(InputError, match=NO_PRINCIPAL):
        select_sources(CHUNKS, max_tokens=500, tokenizer="o200k_base", sources=REQUIRED)


def test_select_sources_requiring_a_principal_answers_for_one() -> None:
    selection = select_sources(
        CHUNKS, max_tokens=500, tokenizer="o200k_base", principal=ACME, sources=REQUIRED
    )

    assert [s.chunk.id for s in selection.sources] == ["public", "acme"]


def test_assembler_select_sources_requiring_a_principal_refuses_none() -> None:
    assembler = ContextAssembler(tokenizer="o200k_base", sources=REQUIRED)

    with pytest.raises(InputError, match=NO_PRINCIPAL):
        assembler.select_sources(CHUNKS)


def test_assemble_requiring_a_principal_refuses_none() -> None:
    assembler = ContextAssembler(
        tokenizer="o200k_base", budget=budget_for("retrieved", 500), sources=REQUIRED
    )

    with pytest.raises(InputError, match=NO_PRINCIPAL):
        assembler.assemble(question="What does a seat cost?", chunks=CHUNKS)


def test_assemble_requiring_a_principal_refuses_none_without_chunks() -> None:
    # The policy is about who asks, not about what was retrieved.
    assembler = ContextAssembler(
        tokenizer="o200k_base", budget=budget_for("retrieved", 500), sources=REQUIRED
    )

    with pytest.raises(InputError, match=NO_PRINCIPAL):
        assembler.assemble(question="What does a seat cost?", chunks=[])


def test_assemble_requiring_a_principal_answers_for_one() -> None:
    assembler = ContextAssembler(
        tokenizer="o200k_base", budget=budget_for("retrieved", 500), sources=REQUIRED
    )
    result = assembler.assemble(question="What does a seat cost?", chunks=CHUNKS, principal=ACME)

    assert "Acme pricing: 40 per seat." in result.text


def test_select_sources_without_the_policy_answers_none_with_public_chunks() -> None:
    selection = select_sources(CHUNKS, max_tokens=500, tokenizer="o200k_base")

    assert [s.chunk.id for s in selection.sources] == ["public"]
