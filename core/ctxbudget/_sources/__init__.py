"""The retrieved-source pipeline, one module per step (docs/sources.md,
"Retrieved sources").

    permit → relevance → dedup → select → escalate → arrange → render → fence

`pipeline` composes them into the retrieved claimant (`claim.RetrievedClaim`) that both
entry points run, `select_sources` (`ctxbudget._standalone`) and the assembler; the fence
itself is `ctxbudget._fence`, and the neutralising of look-alikes, shared with every other
section, `ctxbudget._neutralise`.
"""
