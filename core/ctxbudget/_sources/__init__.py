"""The retrieved-source pipeline, one module per step (README "Retrieved sources").

    permit → relevance → dedup → select → escalate → arrange → render → fence

`pipeline` composes them for both entry points (`select_sources` and the assembler's
`retrieved` claimant, `claim.RetrievedClaim`); the fence itself is `ctxbudget._fence`, and
the neutralising of look-alikes, shared with every other section, `ctxbudget._neutralise`.
"""
