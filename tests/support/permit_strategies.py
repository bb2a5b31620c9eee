"""Hypothesis strategies for the permit rule over stored metadata, shared by the core's
filter tests and the LangChain adapter's: access keys, metadata, principals, policies,
and the chunk an adapter makes of the metadata."""

from __future__ import annotations

from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from ctxbudget import AccessPolicy, Chunk, InputError, Principal, acl_from_metadata

TENANT_KEYS = ("tenant", "org_id")
GROUPS_KEYS = ("groups", "allowed_groups")

names = st.sampled_from(["acme", "globex", "7", "hr", "sales"])
stored_name = st.one_of(names, st.sampled_from([7, 8]))
tenant_value = st.one_of(st.none(), stored_name, st.lists(stored_name, min_size=1, max_size=1))
groups_value = st.one_of(st.none(), stored_name, st.lists(stored_name, max_size=3))
principals = st.one_of(
    st.none(),
    st.builds(
        Principal,
        tenant=st.one_of(st.none(), names),
        groups=st.frozensets(names, max_size=3),
    ),
)
policies = st.builds(AccessPolicy, require_tenant=st.booleans(), require_groups=st.booleans())


@st.composite
def metadatas(draw: st.DrawFn) -> dict[str, Any]:
    keys = {key: draw(tenant_value) for key in TENANT_KEYS if draw(st.booleans())}
    keys |= {key: draw(groups_value) for key in GROUPS_KEYS if draw(st.booleans())}
    return keys | {"title": "Refunds"}


def chunk_of(metadata: dict[str, Any]) -> Chunk:
    """The chunk the adapters make of `metadata`; metadata they refuse is not drawn."""
    try:
        acl = acl_from_metadata(metadata, tenant=TENANT_KEYS, groups=GROUPS_KEYS)
    except InputError:
        reject()
    return Chunk(id="c", content="Refunds take 14 days.", tenant=acl.tenant, groups=acl.groups)
