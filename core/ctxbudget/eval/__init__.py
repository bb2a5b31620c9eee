"""ctxbudget.eval: measure what ordering, k and metadata are worth on your own model and corpus.

Four experiments — position sensitivity, the k knee, metadata ablation and a
context-size regression check — with any ``prompt -> answer`` function as the model.
Every result reports n, the noise floor (one case = 1/n) and a bootstrap 95% interval
per cell, so nobody reads noise as a trend. See docs/eval.md, "Measuring on
your own stack".

Nothing here is imported by ``import ctxbudget``; rich (tables, progress) and
matplotlib (plots) are imported only when used: ``pip install 'ctxbudget[eval]'``.
"""

import typing as _typing

from ctxbudget._deprecated import module_getattr as _module_getattr
from ctxbudget._public import rehome as _rehome
from ctxbudget.eval import _cli
from ctxbudget.eval._ablation import FIELDS, VARIANTS, AblationResult, Field, ablate, ablation
from ctxbudget.eval._cases import Case, load_cases, load_chunks
from ctxbudget.eval._context import assert_context_p95_below, context_size_p95, context_sizes
from ctxbudget.eval._errors import EvalError
from ctxbudget.eval._knee import KneeResult, k_knee
from ctxbudget.eval._model import Model, cached, from_langchain, from_llamaindex
from ctxbudget.eval._position import Distractors, PositionResult, position_sensitivity
from ctxbudget.eval._prompts import DEFAULT_SYSTEM
from ctxbudget.eval._result import Result
from ctxbudget.eval._retrieve import Retriever, lexical_retriever
from ctxbudget.eval._score import Scorer, grounded, keyword_hit
from ctxbudget.eval._simulate import SimulatedModel, simulated_generator, synthetic_corpus
from ctxbudget.eval._stats import Cell, Spread

__all__ = [
    "DEFAULT_SYSTEM",
    "FIELDS",
    "VARIANTS",
    "AblationResult",
    "Case",
    "Cell",
    "Distractors",
    "EvalError",
    "Field",
    "KneeResult",
    "Model",
    "PositionResult",
    "Result",
    "Retriever",
    "Scorer",
    "SimulatedModel",
    "Spread",
    "ablate",
    "ablation",
    "assert_context_p95_below",
    "cached",
    "context_size_p95",
    "context_sizes",
    "from_langchain",
    "from_llamaindex",
    "grounded",
    "k_knee",
    "keyword_hit",
    "lexical_retriever",
    "load_cases",
    "load_chunks",
    "position_sensitivity",
    "simulated_generator",
    "synthetic_corpus",
]

# Old names for one release (CHANGELOG.md): the command line's own entry points, which
# `ctxbudget eval` runs.
_RENAMED: dict[str, tuple[str, object]] = {
    "cli_main": ("the ctxbudget eval command", _cli.cli_main),
    "load_model": ("the ctxbudget eval command's --model", _cli.load_model),
}
if not _typing.TYPE_CHECKING:
    __getattr__ = _module_getattr(__name__, _RENAMED)

_rehome(__name__, globals(), __all__)
