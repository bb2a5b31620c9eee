"""ctxbudget: build the prompt a RAG or agent app sends to its model, under a hard token budget.

The retriever returned twenty chunks; the model reads one string. `ContextAssembler`
owns everything between: floors and priorities per claimant, whole-item trimming,
numbered and fenced sources, a cache-friendly layout, and a report of every decision.
"""

from importlib import metadata as _metadata

from ctxbudget.assemble import ContextAssembler
from ctxbudget.budget import CLAIMANTS, CONTEXT_WINDOWS, Allocation, Budget, Claimant
from ctxbudget.citations import CitationCheck
from ctxbudget.conflicts import ConflictPolicy
from ctxbudget.dedup import Dedup
from ctxbudget.errors import (
    BudgetError,
    ContextBudgetError,
    CtxBudgetError,
    InputError,
    TokenizerError,
    VocabularyError,
)
from ctxbudget.escalate import DocumentLoader, Escalation, SectionLoader
from ctxbudget.fence import SourceFormat, fence_rule, neutralise, neutralise_section
from ctxbudget.inputs import Chunk, Principal, Role, Tool, Turn
from ctxbudget.order import Order
from ctxbudget.permit import AccessPolicy
from ctxbudget.report import Dropped, Report
from ctxbudget.result import (
    AnthropicMessage,
    AnthropicPrompt,
    AnthropicTool,
    Assembled,
    Message,
    MessageStyle,
    OpenAIMessage,
    OpenAITool,
    Source,
)
from ctxbudget.scan import flag_instructions, scan_for_instructions
from ctxbudget.sources import Selection, SourceOptions, select_sources
from ctxbudget.tokens import (
    CallableTokenizer,
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    TokenCounter,
    Tokenizer,
    get_tokenizer,
)
from ctxbudget.turns import TrimmedHistory, trim_turns

__version__ = _metadata.version("ctxbudget")

__all__ = [
    "CLAIMANTS",
    "CONTEXT_WINDOWS",
    "AccessPolicy",
    "Allocation",
    "AnthropicMessage",
    "AnthropicPrompt",
    "AnthropicTool",
    "Assembled",
    "Budget",
    "BudgetError",
    "CallableTokenizer",
    "Chunk",
    "CitationCheck",
    "Claimant",
    "ConflictPolicy",
    "ContextAssembler",
    "ContextBudgetError",
    "CtxBudgetError",
    "Dedup",
    "DocumentLoader",
    "Dropped",
    "Escalation",
    "HuggingFaceTokenizer",
    "InputError",
    "Message",
    "MessageStyle",
    "OpenAIMessage",
    "OpenAITool",
    "Order",
    "Principal",
    "Report",
    "Role",
    "SectionLoader",
    "Selection",
    "Source",
    "SourceFormat",
    "SourceOptions",
    "TiktokenTokenizer",
    "TokenCounter",
    "Tokenizer",
    "TokenizerError",
    "Tool",
    "TrimmedHistory",
    "Turn",
    "VocabularyError",
    "fence_rule",
    "flag_instructions",
    "get_tokenizer",
    "neutralise",
    "neutralise_section",
    "scan_for_instructions",
    "select_sources",
    "trim_turns",
]
