"""Access rules in metadata: which keys hold one, and the one mapping to the ACL fields.

A chunk is restricted only through `Chunk.tenant` and `Chunk.groups`. Metadata that
looks like an access rule but is not enforced is the way a restricted document turns
public, so every such key must be mapped to an ACL field or be refused: in a chunk's
own `metadata`, and in a framework's document or node metadata, which both adapters
read through `acl_from_metadata`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, NamedTuple

from ctxbudget._errors import InputError

__all__ = [
    "ACL_NAMES",
    "Acl",
    "AclField",
    "acl_from_metadata",
    "acl_meaning",
    "check_chunk_metadata",
    "shown_key",
    "unmapped_acl_keys",
]

AclField = Literal["tenant", "groups"]

_NOUNS: Final[dict[str, AclField]] = {
    **dict.fromkeys(["tenant", "org", "organization", "organisation"], "tenant"),
    **dict.fromkeys(
        [
            "group", "usergroup", "securitygroup", "role", "acl", "permission", "reader",
            "accesscontrol", "accesslevel", "visibility", "access", "audience",
        ],
        "groups",
    ),
}  # fmt: skip
"""Words that name an access rule on their own (``roles``, ``tenant_id``)."""

_QUALIFIED_NOUNS: Final[dict[str, AclField]] = {"user": "groups"}
"""Words that name one only after a qualifier: ``allowed_users`` restricts, ``users``
more often describes (who edited a page)."""

_QUALIFIERS: Final = ("allowed", "authorized", "authorised", "permitted")
_SUFFIXES: Final = ("", "s", "id", "ids")


def _names() -> dict[str, AclField]:
    names: dict[str, AclField] = {}
    for nouns, qualifiers in ((_NOUNS, ("", *_QUALIFIERS)), (_QUALIFIED_NOUNS, _QUALIFIERS)):
        for noun, field in nouns.items():
            for qualifier in qualifiers:
                for suffix in _SUFFIXES:
                    names[qualifier + noun + suffix] = field
    return names


ACL_NAMES: Final[Mapping[str, AclField]] = _names()
"""Every key read as an access rule, in its compared form (`acl_meaning`), with the field
that enforces it: an optional qualifier (allowed, authorized, authorised, permitted),
a noun (tenant, org, organization, group, user group, security group, role, acl,
permission, reader, access control, access level, visibility, access, audience; user only
after a qualifier) and an optional ``s``, ``id`` or ``ids``. Names that more often
describe a document than restrict it (owner, author, users, source) are left out: an
error on them would push people to rename ordinary data."""

_SEPARATORS: Final = str.maketrans("", "", "_-. ")


def acl_meaning(key: object) -> AclField | None:
    """The ACL field a metadata `key` names, compared case-folded without ``_ - .`` and
    spaces (``tenant_id``, ``TenantId`` and ``tenant-id`` alike); None for other keys."""
    if not isinstance(key, str):
        return None
    return ACL_NAMES.get(key.casefold().translate(_SEPARATORS))


def unmapped_acl_keys(
    metadata: Mapping[str, Any], mapped: frozenset[str] = frozenset()
) -> list[str]:
    """The keys of `metadata` that look like an access rule (`acl_meaning`), hold a value
    (not None) and are in no ACL field's `mapped` keys, in order: the one rule a chunk's
    own metadata (nothing mapped) and a framework's metadata are both held to."""
    return [
        key
        for key, value in metadata.items()
        if value is not None and key not in mapped and acl_meaning(key) is not None
    ]


def check_chunk_metadata(metadata: Mapping[str, Any]) -> None:
    """`ValueError` when a chunk's own `metadata` holds an access rule: metadata is never
    enforced, so the rule would not restrict who sees the chunk."""
    found = unmapped_acl_keys(metadata)
    if not found:
        return
    meant = {acl_meaning(key) for key in found}
    fields = " and/or ".join(f"{field}=..." for field in ("tenant", "groups") if field in meant)
    keys = ", ".join(map(shown_key, found))
    which = (
        f"keys {keys} look like access rules"
        if len(found) > 1
        else f"key {keys} looks like an access rule"
    )
    raise ValueError(
        f"metadata {which}, but metadata is never enforced, so it would not restrict "
        f"who sees the chunk; set {fields} on the Chunk instead, or rename the key if "
        "it is not an access rule"
    )


def shown_key(key: object, limit: int = 40) -> str:
    """`key` quoted for an error message, cut short so a hostile key cannot flood a log."""
    text = repr(key)
    return text if len(text) <= limit else f"{text[:limit]}..."


class Acl(NamedTuple):
    """The ACL fields read from metadata, and the keys they were read from."""

    tenant: str | None
    """The tenant allowed to see it; None when no mapped key sets one."""
    groups: frozenset[str] | None
    """The groups allowed to see it; None when no mapped key sets any."""
    keys: frozenset[str]
    """Every mapped ACL key present in the metadata: not passed on as plain data."""


def _name(value: object, key: str, field: AclField) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # numeric tenant and group ids, as vector stores often keep them
    if isinstance(value, str) and value:
        return value
    raise InputError(
        f"metadata key {shown_key(key)} ({field}) holds {type(value).__name__} "
        f"{shown_key(value)}; a {'tenant' if field == 'tenant' else 'group'} is a non-empty "
        "str (or an int id)"
    )


def _tenant(value: object, key: str) -> str:
    if isinstance(value, list | tuple | set | frozenset):
        if len(value) != 1:
            raise InputError(
                f"metadata key {shown_key(key)} (tenant) holds {len(value)} tenants; a chunk "
                "belongs to one tenant (Chunk.tenant), and none would make it public: "
                "store one tenant per chunk"
            )
        (value,) = value
    return _name(value, key, "tenant")


def _groups(value: object, key: str) -> frozenset[str]:
    if isinstance(value, list | tuple | set | frozenset):
        return frozenset(_name(group, key, "groups") for group in value)
    return frozenset({_name(value, key, "groups")})  # one group, never its characters


def _shown_value(value: str | frozenset[str]) -> str:
    return shown_key(value) if isinstance(value, str) else shown_key(sorted(value))


def _read(metadata: Mapping[str, Any], keys: Sequence[str], field: AclField) -> Any:
    """The value the keys of `keys` set (not None) in `metadata` agree on; None if unset."""
    present = [key for key in keys if metadata.get(key) is not None]
    shape = _tenant if field == "tenant" else _groups
    values = [shape(metadata[key], key) for key in present]
    if any(value != values[0] for value in values[1:]):
        pairs = zip(present, values, strict=True)
        read = ", ".join(f"{shown_key(key)} = {_shown_value(value)}" for key, value in pairs)
        raise InputError(
            f"metadata keys mapped to {field} disagree ({read}); keep one, since either "
            "could be the rule meant"
        )
    return values[0] if values else None


def _keys(keys: Sequence[str], field: AclField) -> frozenset[str]:
    if isinstance(keys, str):  # its characters would be the keys, and the key unmapped
        raise InputError(f"{field}= is a sequence of metadata keys: use ({shown_key(keys)},)")
    return frozenset(keys)


def acl_from_metadata(
    metadata: Mapping[str, Any],
    *,
    tenant: Sequence[str] = ("tenant",),
    groups: Sequence[str] = ("groups",),
    fix: str = "name it in tenant=... or groups=...",
) -> Acl:
    """The ACL a framework object's `metadata` carries under the keys mapped to `tenant`
    and `groups`; `InputError` when it cannot be enforced as written.

    Refused: a key that looks like an access rule (`acl_meaning`) but is mapped to
    neither field, whatever else is set (`fix` says how to map it); two mapped keys of
    one field that disagree; a key mapped to both fields; a value that is not a name (or,
    for the tenant, not exactly one). A tenant list of one is that tenant; a str of groups
    is one group; int ids become str. Keys whose value is None carry no rule.
    """
    tenant_keys, group_keys = _keys(tenant, "tenant"), _keys(groups, "groups")
    both = tenant_keys & group_keys
    if both:
        raise InputError(
            f"metadata key {shown_key(min(both, key=str))} is mapped to both tenant and "
            "groups; a key holds one of them: map it to one"
        )
    mapped = tenant_keys | group_keys
    unmapped = unmapped_acl_keys(metadata, mapped)
    if unmapped:
        key = unmapped[0]
        raise InputError(
            f"metadata key {shown_key(key)} looks like an access rule ({acl_meaning(key)}) but "
            f"is not mapped to an ACL field, so it would not be enforced: {fix}, or rename "
            "the key if it is not an access rule"
        )
    return Acl(
        _read(metadata, tenant, "tenant"),
        _read(metadata, groups, "groups"),
        frozenset(key for key in mapped if key in metadata),
    )
