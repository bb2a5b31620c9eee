"""Upper-bound counts for models whose tokenizer is not public: Claude and Gemini.

No package ships their vocabularies, and the exact count is a network call. Offline, the
only honest count is one that is never below the model's: o200k's count times the worst
ratio measured for that kind of text, plus a margin. One multiplier for all text would be
either unsafe or wasteful (Claude's worst ratio is on emoji and CJK, 1.75x for Claude 3 to
4.6, against 1.26x on code), so text is split into runs of two kinds and each run is
counted with its kind's bound. The ratios are those of ctok 1.3, a reconstruction of
Claude's counts from recorded API answers, against o200k (docs/tokenizers.md,
"Counting other models").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from ctxbudget._tokens import TiktokenTokenizer

__all__ = ["ESTIMATES", "Estimate", "EstimateTokenizer"]

MARGIN: Final = 0.10
"""Head-room above the worst measured ratio, for text unlike the measured samples."""

_LATIN: Final = "\x00-\u024f\u2000-\u200c\u200e-\u206f"
"""Latin script, ASCII code and general punctuation (not the zero-width joiner, which binds
emoji): the text whose ratio was measured on English prose and Python."""

_EMOJI_MARKS: Final = "\u200d\u20e3\ufe0e\ufe0f"
"""What makes the character before it part of an emoji (``1\ufe0f\u20e3`` is the keycap 1):
such a character is counted with the emoji, not as Latin text."""

_RUNS: Final = re.compile(
    f"(?P<latin>(?:[{_LATIN}](?![{_EMOJI_MARKS}]))+)|(?:[^{_LATIN}]|[{_LATIN}](?=[{_EMOJI_MARKS}]))+"
)


@dataclass(frozen=True)
class Estimate:
    """One family's bound: the worst measured ratio to o200k per kind of text, and why."""

    label: str
    """The count method's name, e.g. ``estimate:claude-v3``."""
    latin: Mapping[str, float]
    """Measured ratios on Latin-script text and code, by sample."""
    other: Mapping[str, float]
    """Measured ratios on every other script and on emoji, by sample."""
    margin: float = MARGIN

    def bound(self, ratios: Mapping[str, float]) -> int:
        """The worst of `ratios` with the margin, in thousandths (rounded up)."""
        return math.ceil(round(max(ratios.values()) * (1 + self.margin) * 1000, 6))


# ctok 1.3's counts over o200k's on the same samples (tokenizers-beyond-openai note, 3.5):
# English prose, the GPL-3 text, a Python snippet, json/decoder.py; Chinese, Japanese, emoji.
_V3 = Estimate(
    "estimate:claude-v3",
    {"english": 1.08, "gpl3": 1.05, "code": 1.26, "code_big": 1.19},
    {"zh": 1.74, "ja": 1.27, "emoji": 1.75},
)
_V47 = Estimate(
    "estimate:claude-v4.7",
    {"english": 1.59, "gpl3": 1.46, "code": 1.68, "code_big": 1.50},
    {"zh": 1.81, "ja": 1.33, "emoji": 1.96},
)
_V48 = Estimate(
    "estimate:claude-v4.8",
    {"english": 1.55, "gpl3": 1.46, "code": 1.64, "code_big": 1.50},
    {"zh": 1.70, "ja": 1.24, "emoji": 1.87},
)
# Gemini's ratios were never measured (no offline reference exists): it borrows the largest
# ratios measured for any family, Claude Opus 4.7's.
_GEMINI = Estimate("estimate:gemini", _V47.latin, _V47.other)

ESTIMATES: Final[Mapping[str, Estimate]] = {e.label: e for e in (_V3, _V47, _V48, _GEMINI)}
"""Every estimate by its label, as `resolve_model` names them."""


class EstimateTokenizer:
    """A `Tokenizer` that counts an upper bound for a model without a public tokenizer.

    Each run of Latin-script text and each run of anything else is counted with o200k and
    multiplied by its kind's bound (`Estimate`); the sum is rounded up.
    """

    def __init__(self, estimate: Estimate, o200k: TiktokenTokenizer) -> None:
        self._estimate = estimate
        self._encode = o200k.encoding.encode_ordinary
        # Every run's count is at least o200k's, so o200k's longest token bounds it too.
        self._max_token_bytes = o200k.max_token_bytes
        self._latin = estimate.bound(estimate.latin)
        self._other = estimate.bound(estimate.other)

    @property
    def name(self) -> str:
        return self._estimate.label

    @property
    def method(self) -> str:
        return self._estimate.label

    @property
    def exact(self) -> bool:
        return False

    @property
    def margin(self) -> float:
        return self._estimate.margin

    @property
    def max_token_bytes(self) -> int:
        return self._max_token_bytes

    def count(self, text: str) -> int:
        thousandths = 0
        for run in _RUNS.finditer(text):
            ratio = self._latin if run.lastgroup == "latin" else self._other
            thousandths += ratio * len(self._encode(run.group()))
        return -(-thousandths // 1000)

    def __repr__(self) -> str:
        return f"EstimateTokenizer({self.name!r})"
