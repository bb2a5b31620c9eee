"""LangChain adapter for ctxbudget: Runnable, DocumentTransformer, DocumentCompressor.

Placeholder: the adapter is built by its own issue; the core is `ctxbudget`.
"""
