"""LlamaIndex adapter for ctxbudget: NodePostprocessor, PromptHelper, ingestion component.

Placeholder: the adapter is built by its own issue; the core is `ctxbudget`.
"""
