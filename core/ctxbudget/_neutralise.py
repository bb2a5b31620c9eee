"""The neutralising of structure look-alikes in every section of the prompt.

No text that reaches the prompt — a retrieved chunk, a memory, a conversation turn, a
tool description — may close or open a section frame, forge a ``[n]`` source header or
a chat turn, and no header field a header annotation (``(effective …)``): such
look-alikes are rewritten into a visibly quoted form. Matching happens on the
normalised view of the text (`_normalised.py`); only the matched spans change, the rest
keeps its bytes. Every pattern is linear in its input (possessive quantifiers, bounded
repeats): untrusted text cannot make neutralising backtrack.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ctxbudget._confusables import WARNING_SIGNS
from ctxbudget._fence import FENCE_TAG, SourceFormat
from ctxbudget._layout import FRAME_TAGS, ROLE_LABELS
from ctxbudget._normalised import (
    STAND_IN,
    View,
    changed_characters,
    unusual_characters,
    view_tables,
    view_text,
)

__all__ = ["neutralise", "neutralise_field", "neutralise_header", "neutralise_section"]

# --- characters removed from the text itself ------------------------------------------------

# Unicode tag characters and supplementary variation selectors are invisible, yet models
# read them ("ASCII smuggling": one hidden byte per character). Both go, as do runs of
# two or more variation selectors of any kind; a single BMP selector (the emoji
# presentation selector after a heart) is ordinary text and stays.
_SMUGGLERS: Final = "\U000e0000-\U000e007f\U000e0100-\U000e01ef"
_REMOVED: Final = re.compile(f"[{_SMUGGLERS}\ufe00-\ufe0f]{{2,}}+|[{_SMUGGLERS}]")
# Each of them is a BMP selector, which the view drops (a changed character), or has this
# first byte in UTF-8, which only the rare characters of planes 12 to 15 have.
_BMP_SELECTORS: Final = frozenset(map(chr, range(0xFE00, 0xFE10)))
_SMUGGLER_LEAD: Final = b"\xf3"

# --- what to look for, and what it becomes --------------------------------------------------


def _word(word: str) -> str:
    """`word` as a pattern that also accepts the stand-in where it has an i, l or |."""
    return "".join(f"[{c}{STAND_IN}]" if c in "il|" else re.escape(c) for c in word)


def _name(tag: str) -> str:
    """A tag name as a pattern: its words with any short run of non-letters between them."""
    return "[^a-z0-9]{0,16}+".join(_word(part) for part in tag.split("_"))


def _tag_names(names: list[str]) -> str:
    """One of tag `names` as a pattern (case aside). The fence's own name has no innocent
    longer spelling; the others (tools, memory, ...) must end there so ``Tooltip`` stays."""
    alternatives = [
        _name(n) if n == FENCE_TAG else f"{_name(n)}(?![a-z0-9_])"
        for n in sorted(names, key=len, reverse=True)
    ]
    return f"(?:{'|'.join(alternatives)})"


def _tags(names: list[str]) -> re.Pattern[str]:
    """Opening or closing tags with one of `names`: ``<``, any slashes, backslashes and
    whitespace, then the name."""
    return re.compile(f"<[\\s/\\\\]*+{_tag_names(names)}", re.IGNORECASE)


# Indentation, quote marks, markdown emphasis. Runs of one class at a time: the same
# characters as one class per character, scanned several times faster.
_DECORATION: Final = "(?:[^\\S\\n]++|[>#*_~]++)*+"

# A stand-in inside the token is a letter (im_start with an l-shaped i), and a bar only
# right before the ">".
_SPECIAL_TOKEN: Final = re.compile(
    f"<[|{STAND_IN}](?:[^|{STAND_IN}<>\\n]|{STAND_IN}(?!>)){{1,64}}+[|{STAND_IN}]>"
)
_INST_BRACKET: Final = f"\\[[\\s/\\\\]*+{_word('inst')}[^\\S\\n]*+\\]"
_INST_SYS: Final = "<<[\\s/\\\\]*+sys[^\\S\\n]*+>>"
_INST: Final = re.compile(f"{_INST_BRACKET}|{_INST_SYS}", re.IGNORECASE)
_HEADER: Final = re.compile(
    f"(?m)^{_DECORATION}\\[[^\\S\\n]*+\\d{{1,6}}+[^\\S\\n]*+\\]",
)
_ROLE_WORDS: Final = sorted(  # longest first; ties by name, so the pattern is the same each run
    {label.lower() for label in ROLE_LABELS.values()}
    | {"human", "ai", "model", "developer", "bot"},
    key=lambda word: (-len(word), word),
)
_EMPHASIS: Final = "(?:[^\\S\\n]++|[*_~]++)*+"  # spaces and markdown emphasis
_ROLE_TAIL: Final = f"{_EMPHASIS}:"
_ROLE: Final = re.compile(
    f"(?m)^{_DECORATION}(?P<role>{'|'.join(map(_word, _ROLE_WORDS))}){_ROLE_TAIL}",
    re.IGNORECASE,
)


def _escaped(found: re.Match[str]) -> str:
    return found.group().replace("<", "&lt;").replace(">", "&gt;")


def _bracketed(found: re.Match[str]) -> str:
    return found.group().replace("[", "(").replace("]", ")")


def _marker(found: re.Match[str]) -> str:
    return _bracketed(found).replace("<", "&lt;").replace(">", "&gt;")


def _quoted(found: re.Match[str]) -> str:
    cut = found.end("role") - found.start()
    return f"{found.group()[:cut]} (quoted){found.group()[cut:]}"


def _quoted_annotation(found: re.Match[str]) -> str:
    rest = found.group()[1:]
    return f"(quoted:{rest}" if rest[:1].isspace() else f"(quoted: {rest}"


@dataclass(frozen=True)
class _Rule:
    """A look-alike to find on the view, the characters it cannot match without (any
    one), and its inert form: never shorter than what it replaces, readable by a person."""

    pattern: re.Pattern[str]
    triggers: str
    defuse: Callable[[re.Match[str]], str]


# --- telling fast that nothing matches ------------------------------------------------------
#
# Almost no text holds a look-alike, and finding that out used to cost more than
# tokenizing the text: every pattern tried at every position of the view, the "^" ones
# included. But each match begins at a "<" or a "[" of the view (tags, special tokens,
# [INST], <<SYS>>), or at the start of a line holding a "[" (headers) or a ":" (roles),
# and the view's "<", "[" and ":" are where str.find says. So the patterns beginning
# with "<" are searched as one, from the first "<", with that literal first character
# (sre skips to each occurrence at memchr-like speed, and tries the rest only there);
# likewise [INST] from the first "["; a line pattern is matched at the start of the
# first few lines holding a "[" or ":", then searched for after each later "\n". Each
# pattern is tried at every place a match of it can begin, so the answer is exact; where
# it is yes, every rule runs over the whole view, as it always did.


def _at_angle(names: list[str]) -> re.Pattern[str]:
    """Where a tag with one of `names`, a special token or a ``<<SYS>>`` marker matches.

    One pattern, beginning with their common literal ``<``: sre skips to each ``<`` and
    tries their rests there, as alternatives. None of them goes on with ``<<`` (a special
    token with ``|``, a marker with ``<`` then spaces or slashes then ``s``, a tag with
    spaces, slashes or a letter), so a run of ``<`` is passed at a glance; the rests that
    begin with a literal or a class come first (sre skips them at a glance where the
    next character differs), and a tag name is looked for only before a letter: `\\w`
    holds every character a name can begin with, in any case.
    """
    return re.compile(
        f"<(?!<<)(?:{_SPECIAL_TOKEN.pattern[1:]}|(?i:{_INST_SYS[1:]})"
        f"|(?i:[\\s/\\\\]*+(?=\\w){_tag_names(names)}))"
    )


def _after_break(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """A ``(?m)^`` pattern as one that begins with the ``\\n`` before the line it matches
    (a literal first character sre skips to fast, where it tries ``^`` everywhere)."""
    return re.compile("\n" + pattern.pattern.removeprefix("(?m)^"), pattern.flags & re.IGNORECASE)


_INST_AT_BRACKET: Final = re.compile(_INST_BRACKET, re.IGNORECASE)
_HEADER_AFTER_BREAK: Final = _after_break(_HEADER)
_ROLE_AFTER_BREAK: Final = _after_break(_ROLE)


@dataclass(frozen=True)
class _Rules:
    """The rules for one kind of text, and their patterns that begin with ``<`` as one."""

    rules: tuple[_Rule, ...]
    at_angle: re.Pattern[str]
    searched: tuple[re.Pattern[str], ...] = ()
    """Patterns searched for in the whole view: only for short texts (header fields)."""

    def match_somewhere(self, view: str) -> bool:
        """Whether a rule matches somewhere in `view`: what running them all would say."""
        if any(pattern.search(view) is not None for pattern in self.searched):
            return True
        angle = view.find("<")
        if angle >= 0 and self.at_angle.search(view, angle) is not None:
            return True
        bracket = view.find("[")
        if bracket >= 0 and (
            _INST_AT_BRACKET.search(view, bracket) is not None
            or _on_a_line(_HEADER, _HEADER_AFTER_BREAK, _BEFORE_BRACKET, view, "[", bracket)
        ):
            return True
        colon = view.find(":")
        return colon >= 0 and _on_a_line(_ROLE, _ROLE_AFTER_BREAK, _BEFORE_COLON, view, ":", colon)


_LINES_TRIED: Final = 4
"""Lines a line-start pattern is matched on one by one, before one search of the rest."""

# The ASCII characters that can come right before the "[" of a header (decoration, or
# the line break before it) and the ":" of a role (spaces, emphasis, or the last letter
# of a role word, in either case). A line whose first "[" or ":" comes after any other
# ASCII character cannot match: "09:00", "Note:", "a[3]" need no regex call.
_ASCII_SPACES: Final = " \t\x0b\x0c\r\x1c\x1d\x1e\x1f"
_BEFORE_BRACKET: Final = frozenset(_ASCII_SPACES + "\n>#*_~")
_BEFORE_COLON: Final = frozenset(
    _ASCII_SPACES + "*_~" + "".join(word[-1] + word[-1].upper() for word in _ROLE_WORDS)
)


def _on_a_line(
    pattern: re.Pattern[str],
    after_break: re.Pattern[str],
    before: frozenset[str],
    view: str,
    char: str,
    index: int,
) -> bool:
    """Whether line-start `pattern` matches in `view`. It needs `char` on its line, after
    a character of `before` or a non-ASCII one; the first `char` is at `index`
    (`after_break` is `pattern` after a ``\\n``)."""
    for _ in range(_LINES_TRIED):
        previous = view[index - 1] if index else "\n"  # the text starts a line
        if (previous in before or not previous.isascii()) and pattern.match(
            view, view.rfind("\n", 0, index) + 1
        ) is not None:
            return True
        index = view.find("\n", index)  # the next line
        if index < 0:
            return False
        index = view.find(char, index)
        if index < 0:
            return False
    # Many lines hold `char`: one search tries every line from the next one holding it.
    return after_break.search(view, view.rfind("\n", 0, index)) is not None


def _rules(tag_names: list[str]) -> _Rules:
    """The rules for a text in which tags with `tag_names` must not be forged."""
    return _Rules(
        rules=(
            _Rule(_tags(tag_names), "<", _escaped),
            _Rule(_SPECIAL_TOKEN, "<", _escaped),
            _Rule(_INST, "[<", _marker),
            _Rule(_HEADER, "[", _bracketed),
            _Rule(_ROLE, ":", _quoted),
        ),
        at_angle=_at_angle(tag_names),
    )


_SOURCE_RULES: Final[dict[SourceFormat, _Rules]] = {
    "markdown": _rules([FENCE_TAG]),
    "xml": _rules([FENCE_TAG, "document"]),
}
_SECTION_RULES: Final = _rules([*FRAME_TAGS.values(), "document"])

# The annotations a markdown source header adds after its fields (`_sources/render.py`):
# "(effective 2025-03-01)", "(updated 2024-01-01; may be out of date)", "⚠ warning". The
# conflict rule has the model trust the first: a title must not be able to spell one.
_ANNOTATION: Final = re.compile(
    f"\\({_EMPHASIS}(?:{_word('effective')}|updated)(?![a-z])", re.IGNORECASE
)
_FIELD_RULES: Final = _Rules(
    rules=(*_SOURCE_RULES["markdown"].rules, _Rule(_ANNOTATION, "(", _quoted_annotation)),
    at_angle=_SOURCE_RULES["markdown"].at_angle,
    searched=(_ANNOTATION,),
)
# A warning sign, and the variation selector that picks its emoji or text form (runs of
# them are gone by then).
_WARNING_SIGN: Final = re.compile(f"[{WARNING_SIGNS}][\ufe00-\ufe0f]?")


def _rewrite(text: str, rules: _Rules, changed: str) -> str:
    """`text`, whose changed characters are `changed` (`changed_characters`), with every look-alike
    found on its view rewritten; `text` itself if none."""
    while True:
        viewed = view_text(text, changed)
        if not rules.match_somewhere(viewed):
            return text
        view = View(viewed, text)  # a rule matches: `found` below is not empty
        active = [r for r in rules.rules if any(t in viewed for t in r.triggers)]
        found = sorted(
            (
                (match.start(), -match.end(), order, match, rule)
                for order, rule in enumerate(active)
                for match in rule.pattern.finditer(viewed)
            ),
            key=lambda item: item[:3],
        )
        out: list[str] = []
        cursor = 0
        overlapped = False
        for _, _, _, match, rule in found:
            start, view_start = view.start_of(match.start())
            end, view_end = view.end_of(match.end())
            if start < cursor:  # overlaps a span already rewritten: next pass
                overlapped = True
                continue
            out.append(text[cursor:start])
            # A match can begin or end inside one character's expansion (a ligature):
            # the rest of that character's view stays beside the rewritten part.
            out.append(
                viewed[view_start : match.start()]
                + rule.defuse(match)
                + viewed[match.end() : view_end]
            )
            cursor = end
        out.append(text[cursor:])
        text = "".join(out)
        if not overlapped:
            return text
        changed = changed_characters(text)


def _neutralised(text: str, rules: _Rules) -> str:
    """`text` without smuggled characters, and with every look-alike of `rules` rewritten."""
    if text.isascii():
        return _rewrite(text, rules, changed_characters(text))
    utf8 = text.encode("utf-8", "surrogatepass")
    unusual = unusual_characters(utf8)
    changed = changed_characters(text, unusual)
    # Whatever _REMOVED finds in `text` it finds in `unusual`, where no ASCII separates a
    # run of selectors: only a text with a smuggled character is searched whole.
    if (
        (_SMUGGLER_LEAD in utf8 or not _BMP_SELECTORS.isdisjoint(changed))
        and _REMOVED.search(unusual) is not None
        and _REMOVED.search(text) is not None
    ):
        text = _REMOVED.sub("", text)
        changed = changed_characters(text)
    return _rewrite(text, rules, changed)


def neutralise(text: str, *, fmt: SourceFormat = "markdown") -> str:
    """Retrieved `text` with everything that could pose as prompt structure rewritten inertly.

    Rewrites fence tags (and, for the XML format, ``<document`` tags), line-start
    ``[n]`` headers, chat-turn lines (``Human:``, ``**Assistant:**``) and markers
    (``<|im_start|>``, ``[INST]``), and strips invisible Unicode tag characters and
    supplementary variation selectors. Returns `text` itself when nothing changed,
    which is almost always, and costs a few C-speed scans to find that out.
    """
    return _neutralised(text, _SOURCE_RULES[fmt])


def neutralise_field(text: str) -> str:
    """A markdown source header's field (title, heading, parse warning) as `neutralise`
    makes it, and unable to spell the header's own annotations.

    ``(effective …`` and ``(updated …`` (on the normalised view: fullwidth, look-alike or
    in any case) become ``(quoted: effective …`` and ``(quoted: updated …``; a warning
    sign becomes ``(warning sign)``. Returns `text` itself when nothing changed.
    """
    out = _neutralised(text, _FIELD_RULES)
    return out if out.isascii() else _WARNING_SIGN.sub("(warning sign)", out)


# An opening "<" or "[" with only spaces, slashes and backslashes after it: with the next
# line it can still become a tag or an [INST] marker ("Policy <" + "\n/retrieved_...").
_OPENER_AT_END: Final = re.compile(r"[<\[][\s/\\]*+\Z")


def neutralise_header(text: str) -> str:
    """A markdown source header after its ``[n]``, made of fields `neutralise_field` already
    cleaned, as one line nothing can pose as structure in: not where two fields join, and
    not with the content on the next line.

    Returns `text` itself when nothing changed.
    """
    text = neutralise(text)
    if _OPENER_AT_END.search(view_text(text, changed_characters(text))) is None:
        return text
    view = view_tables().view
    for index in range(len(text) - 1, -1, -1):
        seen = view.get(ord(text[index]), text[index])
        if seen in ("<", "["):
            inert = "&lt;" if seen == "<" else "("
            return text[:index] + inert + text[index + 1 :]
    return text


def neutralise_section(text: str) -> str:
    """Any section's `text` (memory, a conversation turn, a tool description) made unable
    to forge another section's frame, a source or a turn.

    As `neutralise`, and every frame tag of the prompt's layout — ``<examples>``,
    ``<tools>``, ``<conversation>``, ``<memory>``, ``<retrieved_documents>``,
    ``<document`` — is rewritten too, opening or closing. Returns `text` itself
    when nothing changed.
    """
    return _neutralised(text, _SECTION_RULES)
