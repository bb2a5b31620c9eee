"""One oracle for access rules in metadata, written from the rule of docs/inputs.md, "Inputs", not
from the library: which keys look like access rules, how their values read, when metadata
cannot be enforced as written, and what a principal may see. Both adapters' property
tests judge what reached the model by it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import strategies as st

from ctxbudget import Principal

__all__ = ["Rule", "acl_keys", "expected_acl", "looks_like_acl", "may_see"]

_QUALIFIERS = ("allowed", "authorized", "authorised", "permitted")
_NOUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    *(("tenant", (noun,)) for noun in ("tenant", "org", "organization", "organisation")),
    *(
        ("groups", words)
        for words in (
            ("group",),
            ("user", "group"),
            ("security", "group"),
            ("role",),
            ("acl",),
            ("permission",),
            ("reader",),
            ("access", "control"),
            ("access", "level"),
            ("visibility",),
            ("access",),
            ("audience",),
        )
    ),
)
_AFTER_A_QUALIFIER = ("groups", ("user",))
"""``allowed_users`` restricts; ``users`` alone describes."""
_SUFFIXES = ("", "s", "id", "ids")

_NAMES = frozenset(
    qualifier + "".join(words) + suffix
    for (_, words), qualifiers in (
        *((noun, ("", *_QUALIFIERS)) for noun in _NOUNS),
        (_AFTER_A_QUALIFIER, _QUALIFIERS),
    )
    for qualifier in qualifiers
    for suffix in _SUFFIXES
)

Rule = tuple[str | None, frozenset[str] | None]
"""The (tenant, groups) metadata restricts a document to; None for either: no such rule."""


def looks_like_acl(key: object) -> bool:
    """Whether `key` names an access rule: the grammar, case-folded, without ``_ - .``."""
    return isinstance(key, str) and re.sub(r"[_\-. ]", "", key.casefold()) in _NAMES


@st.composite
def acl_keys(draw: st.DrawFn) -> tuple[str, str]:
    """A key that names an access rule, in a random spelling, and the field it names."""
    field, words = draw(st.sampled_from([*_NOUNS, _AFTER_A_QUALIFIER]))
    qualifiers = _QUALIFIERS if (field, words) == _AFTER_A_QUALIFIER else ("", *_QUALIFIERS)
    spelt = [w for w in (draw(st.sampled_from(qualifiers)), *words) if w]
    suffix = draw(st.sampled_from(_SUFFIXES))
    if suffix == "s":
        spelt[-1] += "s"
    elif suffix:
        spelt.append(suffix)
    cased = [draw(st.sampled_from([w, w.upper(), w.title()])) for w in spelt]
    return draw(st.sampled_from(["", "_", "-", ".", " "])).join(cased), field


def _name(value: object) -> str | None:
    """A value as one tenant or group name: a non-empty str, or an int id; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None


def _read(metadata: Mapping[str, Any], keys: Sequence[str], tenant: bool) -> list[Any] | None:
    """What each mapped key set reads as; None when a value is not names as the field needs."""
    read: list[Any] = []
    for key in keys:
        value = metadata.get(key)
        if value is None:
            continue
        names = [_name(item) for item in (value if isinstance(value, list) else [value])]
        if None in names or (tenant and len(names) != 1):
            return None
        read.append(names[0] if tenant else frozenset(names))
    return read


def expected_acl(
    metadata: Mapping[str, Any], tenant: Sequence[str], groups: Sequence[str]
) -> Rule | None:
    """The rule `metadata` carries under the keys mapped to `tenant` and `groups`; None when
    it cannot be enforced as written (an unmapped access-rule key, a value that is not a
    name, keys of one field that disagree)."""
    mapped = {*tenant, *groups}
    if any(looks_like_acl(k) and v is not None and k not in mapped for k, v in metadata.items()):
        return None
    tenants, group_sets = _read(metadata, tenant, True), _read(metadata, groups, False)
    if tenants is None or group_sets is None or len(set(tenants)) > 1 or len(set(group_sets)) > 1:
        return None
    return (tenants[0] if tenants else None), (group_sets[0] if group_sets else None)


def may_see(principal: Principal | None, rule: Rule) -> bool:
    """Whether `principal` may see a document restricted by `rule`."""
    tenant, groups = rule
    if tenant is not None and (principal is None or principal.tenant != tenant):
        return False
    return groups is None or (principal is not None and bool(principal.groups & groups))
