"""Types an application annotates with but does not build: `from ctxbudget.types import ...`.

The provider message shapes `Assembled.messages()` and its siblings return, the `Literal`
names of the options' strings, and the caches an assembler exposes as attributes
(`assembler.counter`, `.shingle_cache`, `.rewrite_cache`, `.header_cache`). What an
application builds or calls is in `ctxbudget` itself.
"""

from ctxbudget._claimants import CLAIMANTS, Claimant
from ctxbudget._fence import SourceFormat
from ctxbudget._inputs import Role
from ctxbudget._principal import NoScope
from ctxbudget._public import rehome
from ctxbudget._report import DropReason
from ctxbudget._result import (
    AnthropicMessage,
    AnthropicPrompt,
    AnthropicTool,
    BedrockMessage,
    BedrockPrompt,
    BedrockTool,
    GeminiContent,
    GeminiFunction,
    GeminiPrompt,
    Message,
    MessageStyle,
    OpenAIMessage,
    OpenAITool,
    SearchResultBlock,
    SearchResultPrompt,
)
from ctxbudget._sources.arrange import Order
from ctxbudget._sources.render import HeaderCache
from ctxbudget._standalone import FenceMode
from ctxbudget._textcache import ShingleCache, TextCache
from ctxbudget._tokens import CountCache, CountMethod

__all__ = [
    "CLAIMANTS",
    "AnthropicMessage",
    "AnthropicPrompt",
    "AnthropicTool",
    "BedrockMessage",
    "BedrockPrompt",
    "BedrockTool",
    "Claimant",
    "CountCache",
    "CountMethod",
    "DropReason",
    "FenceMode",
    "GeminiContent",
    "GeminiFunction",
    "GeminiPrompt",
    "HeaderCache",
    "Message",
    "MessageStyle",
    "NoScope",
    "OpenAIMessage",
    "OpenAITool",
    "Order",
    "Role",
    "SearchResultBlock",
    "SearchResultPrompt",
    "ShingleCache",
    "SourceFormat",
    "TextCache",
]

rehome(__name__, globals(), __all__)
