"""ctxbudget: build the prompt a RAG or agent app sends to its model, under a hard token budget.

The retriever returned twenty chunks; the model reads one string. `ContextAssembler`
owns everything between: floors and priorities per claimant, whole-item trimming,
numbered and fenced sources, a cache-friendly layout, and a report of every decision.
"""

from ctxbudget.assemble import ContextAssembler
from ctxbudget.budget import CLAIMANTS, CONTEXT_WINDOWS, Allocation, Budget, Claimant
from ctxbudget.citations import CitationCheck
from ctxbudget.errors import (
    ContextBudgetError,
    CtxBudgetError,
    InputError,
    TokenizerError,
    VocabularyError,
)
from ctxbudget.inputs import Chunk, Principal, Tool, Turn
from ctxbudget.report import Dropped, Report
from ctxbudget.result import Assembled, Message, Source
from ctxbudget.tokens import (
    CallableTokenizer,
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    TokenCounter,
    Tokenizer,
    get_tokenizer,
)

__all__ = [
    "CLAIMANTS",
    "CONTEXT_WINDOWS",
    "Allocation",
    "Assembled",
    "Budget",
    "CallableTokenizer",
    "Chunk",
    "CitationCheck",
    "Claimant",
    "ContextAssembler",
    "ContextBudgetError",
    "CtxBudgetError",
    "Dropped",
    "HuggingFaceTokenizer",
    "InputError",
    "Message",
    "Principal",
    "Report",
    "Source",
    "TiktokenTokenizer",
    "TokenCounter",
    "Tokenizer",
    "TokenizerError",
    "Tool",
    "Turn",
    "VocabularyError",
    "get_tokenizer",
]
