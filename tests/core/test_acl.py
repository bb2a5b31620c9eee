"""Access rules in metadata (_acl.py): every ACL-looking key is mapped to an ACL field or
refused, in a framework's metadata (`acl_from_metadata`) and in `Chunk.metadata` alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxbudget import Acl, Chunk, InputError, Principal, acl_from_metadata, select_sources
from ctxbudget._acl import ACL_NAMES, AclField, acl_meaning, unmapped_acl_keys
from tests.support.factories import chunk

STAFF = Principal(tenant="acme", groups=frozenset({"staff"}))


def shown_to(principal: Principal, acl: Acl, content: str = "Board minutes: layoffs.") -> str:
    """The prompt text `principal` gets for one chunk carrying `acl`."""
    restricted = Chunk(id="c", content=content, tenant=acl.tenant, groups=acl.groups)
    return select_sources(
        [restricted], max_tokens=500, tokenizer="o200k_base", principal=principal
    ).text


# --- the name grammar -----------------------------------------------------------------------

LISTED: dict[str, AclField] = {
    # Named in issue #17 as missing before it.
    "allowed_tenants": "tenant",
    "tenant_ids": "tenant",
    "user_groups": "groups",
    "allowed_user_groups": "groups",
    "authorized_groups": "groups",
    "access": "groups",
    "audience": "groups",
    # The names refused before the grammar, which it must keep.
    **dict.fromkeys(
        ["tenant", "tenants", "tenant_id", "org", "org_id", "organization", "organisation_id"],
        "tenant",
    ),
    **dict.fromkeys(
        [
            "group", "groups", "group_id", "group_ids", "allowed_groups", "security_groups",
            "acl", "acls", "access_control", "permissions", "allowed_users", "allowed_roles",
            "roles", "readers", "visibility", "access_level",
        ],
        "groups",
    ),
}  # fmt: skip


@pytest.mark.parametrize(("key", "field"), LISTED.items())
def test_acl_meaning_of_a_listed_name_is_its_field(key: str, field: AclField) -> None:
    assert acl_meaning(key) == field


DESCRIPTIVE = ["owner", "author", "users", "user", "source", "tenantless", "url", "title", "tags"]


@pytest.mark.parametrize("key", DESCRIPTIVE)
def test_acl_meaning_of_a_descriptive_name_is_none(key: str) -> None:
    assert acl_meaning(key) is None


@pytest.mark.parametrize("key", DESCRIPTIVE)
def test_chunk_accepts_descriptive_metadata_key(key: str) -> None:
    assert chunk(metadata={key: "x"}).metadata == {key: "x"}


def test_acl_meaning_of_user_needs_a_qualifier() -> None:
    assert (acl_meaning("users"), acl_meaning("permitted_users")) == (None, "groups")


@pytest.mark.parametrize("key", [1, None, ("tenant",), b"tenant"])
def test_acl_meaning_of_a_key_that_is_not_a_str_is_none(key: object) -> None:
    assert acl_meaning(key) is None


@st.composite
def spelled(draw: st.DrawFn) -> tuple[str, AclField]:
    """A name of `ACL_NAMES` in random case, with ``_ - .`` and spaces anywhere in it."""
    name = draw(st.sampled_from(sorted(ACL_NAMES)))
    letters = [c.upper() if draw(st.booleans()) else c for c in name]
    gaps = draw(st.lists(st.sampled_from(["", "", "_", "-", ".", " ", "__"]), min_size=len(name)))
    return "".join(gap + letter for gap, letter in zip(gaps, letters, strict=False)), ACL_NAMES[
        name
    ]


@given(spelled())
def test_acl_meaning_reads_every_name_in_any_spelling(key_and_field: tuple[str, AclField]) -> None:
    key, field = key_and_field
    assert acl_meaning(key) == field


@given(spelled(), st.sampled_from([{}, {"tenant": "acme"}, {"groups": frozenset({"staff"})}]))
def test_chunk_refuses_every_acl_name_in_metadata_in_any_spelling(
    key_and_field: tuple[str, AclField], acl: dict[str, Any]
) -> None:
    key, field = key_and_field
    with pytest.raises(ValidationError, match=rf"looks like an access rule.*set {field}=\.\.\."):
        chunk(metadata={key: "hr"}, **acl)


def test_chunk_acl_error_cuts_a_long_key_short() -> None:
    key = "tenant" + "_" * 5_000
    with pytest.raises(ValidationError) as caught:
        chunk(metadata={key: "acme"})
    assert "'tenant____" in str(caught.value)
    assert len(str(caught.value)) < 1_000


# --- the partial ACLs of issue #17, item 1 --------------------------------------------------

PARTIAL = [
    pytest.param({"groups": ["staff"], "tenant_id": "globex"}, "tenant_id", id="groups+tenant_id"),
    pytest.param(
        {"tenant": "acme", "allowed_groups": ["board"]}, "allowed_groups", id="tenant+allowed"
    ),
    pytest.param({"tenant": "acme", "tenant_id": "globex"}, "tenant_id", id="tenant+tenant_id"),
]  # fmt: skip


@pytest.mark.parametrize(("metadata", "unmapped"), PARTIAL)
def test_acl_from_metadata_refuses_a_partial_acl(metadata: dict[str, Any], unmapped: str) -> None:
    with pytest.raises(
        InputError,
        match=rf"^metadata key '{unmapped}' looks like an access rule \((tenant|groups)\) but "
        r"is not mapped to an ACL field, so it would not be enforced: name it in "
        r"tenant=\.\.\. or groups=\.\.\., or rename the key",
    ):
        acl_from_metadata(metadata)


@pytest.mark.parametrize(("metadata", "unmapped"), PARTIAL)
def test_chunk_refuses_the_unmapped_key_of_a_partial_acl_beside_acl_fields(
    metadata: dict[str, Any], unmapped: str
) -> None:
    fields = {k: v for k, v in metadata.items() if k != unmapped}
    with pytest.raises(ValidationError, match=rf"metadata key '{unmapped}' looks like an access"):
        chunk(metadata={unmapped: metadata[unmapped]}, **fields)


def test_acl_from_metadata_mapped_tenant_id_beside_groups_hides_the_chunk() -> None:
    acl = acl_from_metadata(
        {"groups": ["staff"], "tenant_id": "globex"}, tenant=("tenant", "tenant_id")
    )

    assert acl == Acl("globex", frozenset({"staff"}), frozenset({"tenant_id", "groups"}))
    assert shown_to(STAFF, acl) == ""


def test_acl_from_metadata_mapped_allowed_groups_beside_tenant_hides_the_chunk() -> None:
    acl = acl_from_metadata(
        {"tenant": "acme", "allowed_groups": ["board"]}, groups=("groups", "allowed_groups")
    )

    assert acl == Acl("acme", frozenset({"board"}), frozenset({"tenant", "allowed_groups"}))
    assert shown_to(STAFF, acl) == ""


def test_acl_from_metadata_mapped_tenant_keys_that_disagree_raise() -> None:
    with pytest.raises(
        InputError,
        match=r"^metadata keys mapped to tenant disagree \('tenant' = 'acme', 'tenant_id' = "
        r"'globex'\); keep one, since either could be the rule meant$",
    ):
        acl_from_metadata({"tenant": "acme", "tenant_id": "globex"}, tenant=("tenant", "tenant_id"))


def test_acl_from_metadata_group_keys_that_disagree_raise() -> None:
    with pytest.raises(
        InputError,
        match=r"^metadata keys mapped to groups disagree \('groups' = \['staff'\], 'roles' = "
        r"\['board', 'staff'\]\)",
    ):
        acl_from_metadata(
            {"groups": "staff", "roles": ["staff", "board"]}, groups=("groups", "roles")
        )


def test_acl_from_metadata_keys_that_agree_once_shaped_are_one_rule() -> None:
    acl = acl_from_metadata(
        {"tenant": "acme", "org": ["acme"], "groups": ["a", "b"], "roles": ("b", "a")},
        tenant=("tenant", "org"),
        groups=("groups", "roles"),
    )

    assert (acl.tenant, acl.groups) == ("acme", frozenset({"a", "b"}))


def test_acl_from_metadata_mapped_key_set_to_none_neither_sets_nor_disagrees() -> None:
    acl = acl_from_metadata({"tenant": "acme", "tenant_id": None}, tenant=("tenant", "tenant_id"))

    assert acl == Acl("acme", None, frozenset({"tenant", "tenant_id"}))


def test_acl_from_metadata_unmapped_acl_key_set_to_none_is_no_rule() -> None:
    assert acl_from_metadata({"tenant_id": None}) == Acl(None, None, frozenset())


def test_acl_from_metadata_error_says_the_fix_it_is_given() -> None:
    with pytest.raises(InputError, match=r"not be enforced: pass tenant_keys=\.\.\., or rename"):
        acl_from_metadata({"org_id": "acme"}, fix="pass tenant_keys=...")


def test_acl_from_metadata_mapped_descriptive_key_is_read() -> None:
    acl = acl_from_metadata({"owner": "acme", "url": "u"}, tenant=("owner",))

    assert acl == Acl("acme", None, frozenset({"owner"}))


def test_acl_from_metadata_keys_are_the_mapped_keys_present() -> None:
    acl = acl_from_metadata(
        {"tenant": "acme", "url": "u", "groups": None}, tenant=("tenant", "org"), groups=("groups",)
    )

    assert acl.keys == frozenset({"tenant", "groups"})


def test_acl_from_metadata_does_not_change_the_metadata() -> None:
    metadata = {"tenant": ["acme"], "groups": ["a"], "url": "u"}
    acl_from_metadata(metadata)

    assert metadata == {"tenant": ["acme"], "groups": ["a"], "url": "u"}


def test_acl_from_metadata_keys_given_as_a_str_raise() -> None:
    with pytest.raises(
        InputError, match=r"^tenant= is a sequence of metadata keys: use \('tenant_id',\)$"
    ):
        acl_from_metadata({"tenant_id": "acme"}, tenant="tenant_id")


def test_acl_from_metadata_key_mapped_to_both_fields_raises() -> None:
    with pytest.raises(
        InputError, match=r"^metadata key 'org' is mapped to both tenant and groups; a key holds"
    ):
        acl_from_metadata({"org": "acme"}, tenant=("org",), groups=("groups", "org"))


# --- values ---------------------------------------------------------------------------------


def test_acl_from_metadata_str_of_groups_is_one_group_never_its_characters() -> None:
    assert acl_from_metadata({"groups": "staff"}).groups == frozenset({"staff"})


def test_acl_from_metadata_tenant_list_of_one_is_that_tenant() -> None:
    assert acl_from_metadata({"tenant": ["acme"]}).tenant == "acme"


@pytest.mark.parametrize(("value", "count"), [(["acme", "globex"], 2), ([], 0), (set(), 0)])
def test_acl_from_metadata_tenant_collection_not_of_one_raises(value: object, count: int) -> None:
    with pytest.raises(
        InputError,
        match=rf"^metadata key 'tenant' \(tenant\) holds {count} tenants; a chunk belongs to "
        r"one tenant \(Chunk\.tenant\), and none would make it public: store one tenant",
    ):
        acl_from_metadata({"tenant": value})


def test_acl_from_metadata_empty_groups_are_nobody() -> None:
    acl = acl_from_metadata({"groups": []})

    assert acl.groups == frozenset()
    assert shown_to(STAFF, acl) == ""


def test_acl_from_metadata_int_ids_become_str() -> None:
    acl = acl_from_metadata({"tenant": 42, "groups": [7, "staff"]})

    assert (acl.tenant, acl.groups) == ("42", frozenset({"7", "staff"}))


@pytest.mark.parametrize(
    ("metadata", "held"),
    [
        ({"tenant": True}, r"'tenant' \(tenant\) holds bool True; a tenant"),
        ({"groups": [False]}, r"'groups' \(groups\) holds bool False; a group"),
        ({"tenant": ""}, r"'tenant' \(tenant\) holds str ''; a tenant"),
        ({"groups": ["a", ""]}, r"'groups' \(groups\) holds str ''; a group"),
        ({"tenant": 1.5}, r"'tenant' \(tenant\) holds float 1\.5; a tenant"),
        ({"groups": [["a"]]}, r"'groups' \(groups\) holds list \['a'\]; a group"),
        ({"groups": {"a": 1}}, r"'groups' \(groups\) holds dict \{'a': 1\}; a group"),
        ({"tenant": [None]}, r"'tenant' \(tenant\) holds NoneType None; a tenant"),
    ],
)
def test_acl_from_metadata_value_that_is_not_a_name_raises(
    metadata: dict[str, Any], held: str
) -> None:
    with pytest.raises(
        InputError, match=rf"^metadata key {held} is a non-empty str \(or an int id\)$"
    ):
        acl_from_metadata(metadata)


def test_acl_from_metadata_none_value_sets_nothing() -> None:
    assert acl_from_metadata({"tenant": None, "groups": None})[:2] == (None, None)


# --- the property, against an independent oracle --------------------------------------------

ACL_KEYS: dict[str, AclField] = {
    "tenant": "tenant", "Tenant-Id": "tenant", "org": "tenant", "allowed_tenants": "tenant",
    "groups": "groups", "allowed.groups": "groups", "ACL": "groups", "roles": "groups",
    "user groups": "groups", "access": "groups", "audience": "groups",
}  # fmt: skip
"""ACL-looking keys written out by hand, with the field each one names."""
PLAIN_KEYS = ("url", "owner", "users", "source", "page")

GOOD = st.one_of(
    st.sampled_from(["acme", "globex", "staff"]),
    st.integers(0, 2),
    st.lists(st.sampled_from(["acme", "staff", "board"]), max_size=2),
    st.frozensets(st.sampled_from(["staff", "board"]), max_size=2),
)
"""Values that are names, or collections of them."""
BAD = st.one_of(
    st.sampled_from(["", True, False, 1.5, {"tenant": "acme"}]),
    st.lists(
        st.one_of(st.sampled_from(["staff", "", None, True]), st.just(["nested"])),
        min_size=1,
        max_size=3,
    ),
)
"""Values that are none, or hold something that is not a name."""
VALUES = st.one_of(GOOD, GOOD, GOOD, st.none(), BAD)


class UnenforceableError(Exception):
    """What the oracle says where the metadata cannot be enforced as written."""


def name(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value:
        return value
    raise UnenforceableError


def shaped(value: object, field: AclField) -> str | frozenset[str]:
    if not isinstance(value, list | tuple | set | frozenset):
        return name(value) if field == "tenant" else frozenset({name(value)})
    names = [name(v) for v in value]
    if field == "groups":
        return frozenset(names)
    if len(names) != 1:
        raise UnenforceableError
    return names[0]


def oracle(
    metadata: Mapping[str, object], tenant: Sequence[str], groups: Sequence[str]
) -> tuple[str | frozenset[str] | None, ...]:
    """(tenant, groups, keys) as docs/inputs.md, "Inputs" reads them, or `UnenforceableError`."""
    mapped = {*tenant, *groups}
    if any(key in ACL_KEYS and key not in mapped for key, v in metadata.items() if v is not None):
        raise UnenforceableError
    read: list[str | frozenset[str] | None] = []
    fields: tuple[tuple[AclField, Sequence[str]], ...] = (("tenant", tenant), ("groups", groups))
    for field, keys in fields:
        values = {shaped(metadata[k], field) for k in keys if metadata.get(k) is not None}
        if len(values) > 1:
            raise UnenforceableError
        read.append(values.pop() if values else None)
    return (*read, frozenset(mapped & metadata.keys()))


@st.composite
def mapped_metadata(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], list[str]]:
    """Metadata, and keys mapped to tenant and groups: present or not, ACL-looking or not."""
    keys = st.sampled_from([*ACL_KEYS, *PLAIN_KEYS])
    metadata = draw(st.dictionaries(keys, VALUES, max_size=4))
    tenant: list[str] = []
    groups: list[str] = []
    for key in [*metadata, *draw(st.lists(keys, max_size=2)), "absent"]:
        # An ACL-looking key is most often mapped, and to the field it names.
        choices = ["named", "named", "other", None] if key in ACL_KEYS else ["other", None, None]
        choice = draw(st.sampled_from(choices))
        field = ACL_KEYS.get(key, "tenant")
        if choice == "other":
            field = "groups" if field == "tenant" else "tenant"
        if choice is not None and key not in (*tenant, *groups):
            (tenant if field == "tenant" else groups).append(key)
    return metadata, tenant, groups


@given(mapped_metadata())
def test_acl_from_metadata_refuses_exactly_what_cannot_be_enforced(
    case: tuple[dict[str, Any], list[str], list[str]],
) -> None:
    metadata, tenant, groups = case
    try:
        expected = oracle(metadata, tenant, groups)
    except UnenforceableError:
        with pytest.raises(InputError):
            acl_from_metadata(metadata, tenant=tenant, groups=groups)
    else:
        assert tuple(acl_from_metadata(metadata, tenant=tenant, groups=groups)) == expected


@given(st.dictionaries(st.sampled_from([*ACL_KEYS, *PLAIN_KEYS]), st.sampled_from([None, "x"])))
def test_chunk_refuses_metadata_exactly_when_an_acl_key_holds_a_value(
    metadata: dict[str, str | None],
) -> None:
    if any(key in ACL_KEYS and value is not None for key, value in metadata.items()):
        with pytest.raises(ValidationError, match=r"(looks like an access rule|look like access)"):
            chunk(metadata=metadata, tenant="acme")
    else:
        assert chunk(metadata=metadata, tenant="acme").metadata == metadata


# --- ACL-looking keys in Chunk.metadata ------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["tenant_id", "TenantId", "org", "allowed-groups", "ACL", "group_ids", "visibility"]
)
def test_chunk_rejects_acl_metadata_without_acl_fields(key: str) -> None:
    with pytest.raises(
        ValidationError,
        match=rf"metadata key '{key}' looks like an access rule, but metadata is never "
        r"enforced, so it would not restrict who sees the chunk",
    ):
        chunk(metadata={key: "hr"})


def test_chunk_acl_metadata_error_names_the_field_to_set() -> None:
    with pytest.raises(ValidationError, match=r"set tenant=\.\.\. on the Chunk instead"):
        chunk(metadata={"tenant_id": "acme"})


def test_chunk_acl_metadata_error_names_every_key_and_field() -> None:
    with pytest.raises(
        ValidationError,
        match=r"metadata keys 'tenant_id', 'acl' look like access rules.*"
        r"set tenant=\.\.\. and/or groups=\.\.\. on the Chunk instead",
    ):
        chunk(metadata={"tenant_id": "acme", "acl": ["hr"], "url": "u"})


@pytest.mark.parametrize("acl", [{"tenant": "acme"}, {"groups": {"hr"}}, {"groups": frozenset()}])
def test_chunk_rejects_acl_metadata_even_when_acl_fields_are_set(acl: dict[str, Any]) -> None:
    # A partial ACL is no licence: tenant_id="globex" beside tenant="acme" would go unenforced.
    with pytest.raises(ValidationError, match=r"metadata key 'tenant_id' looks like an access"):
        chunk(metadata={"tenant_id": "globex"}, **acl)


def test_chunk_acl_metadata_key_with_none_value_is_allowed() -> None:
    assert chunk(metadata={"tenant": None}).metadata == {"tenant": None}


@pytest.mark.parametrize("key", ["owner", "author", "users", "source_url", "tenantless"])
def test_chunk_descriptive_metadata_key_is_allowed(key: str) -> None:
    assert chunk(metadata={key: "x"}).metadata == {key: "x"}


def test_chunk_metadata_nested_acl_keys_are_not_searched() -> None:
    # Documented limit: only top-level keys are checked.
    assert chunk(metadata={"origin": {"tenant_id": "acme"}}).metadata == {
        "origin": {"tenant_id": "acme"}
    }


def test_unmapped_acl_keys_are_the_acl_keys_holding_a_value_outside_mapped() -> None:
    metadata = {"title": "t", "tenant_id": "acme", "roles": None, "acl": ["hr"], "tenant": "x"}

    assert unmapped_acl_keys(metadata, frozenset({"tenant"})) == ["tenant_id", "acl"]
