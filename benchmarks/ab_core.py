"""Whole-core A/B: this tree's `ctxbudget` against another revision's, in one process.

The other revision's ``core/ctxbudget`` is read from git (``git archive``) and imported
beside this one under the same name, its modules kept apart from this tree's in
`sys.modules` and swapped in around each of its requests (so a lazy import inside it finds
its own modules). Each request's inputs are copied into the other revision's models before
the clock starts; both assemble it, in alternating order. Prints CPU-time medians as
ratios to one encode of the prompt, and whether both gave the same prompt and drops on
every request (they must: speed work never changes a verdict). Where `ab_dedup` swaps
only `dedup.py`, this measures changes spread over several modules.

    python -m benchmarks.ab_core 9e7a99a "200 candidates, ingest counts" --repeat 41
    python -m benchmarks.ab_core 9e7a99a "200 candidates, follow-up, ingest counts" --repeat 41
"""

from __future__ import annotations

import contextlib
import importlib
import io
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import ctxbudget
from benchmarks.ab_dedup import arguments, fingerprint, report
from benchmarks.workloads import NOW, Request
from ctxbudget import get_tokenizer

Modules = dict[str, ModuleType]


def _ours() -> Modules:
    return {
        name: module
        for name, module in sys.modules.items()
        if name == "ctxbudget" or name.startswith("ctxbudget.")
    }


@contextlib.contextmanager
def modules(active: Modules) -> Iterator[None]:
    """`active` as the `ctxbudget` modules in `sys.modules` for the block; this tree's after."""
    mine = _ours()
    for name in mine:
        del sys.modules[name]
    sys.modules.update(active)
    try:
        yield
    finally:
        for name in _ours():
            del sys.modules[name]
        sys.modules.update(mine)


def core_at(revision: str, folder: Path) -> Modules:
    """`revision`'s `ctxbudget` package, imported from a copy of its ``core/`` folder."""
    archive = subprocess.run(
        ["git", "archive", revision, "core/ctxbudget"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    loaded: Modules = {}
    with modules(loaded):
        sys.path.insert(0, str(folder / "core"))
        try:
            importlib.import_module("ctxbudget")
        finally:
            sys.path.remove(str(folder / "core"))
        loaded.update(_ours())
    assert loaded["ctxbudget"] is not ctxbudget
    return loaded


def _copied(request: Request, other: ModuleType) -> dict[str, Any]:
    """`request`'s inputs as `other`'s models, for `other.ContextAssembler.assemble`."""
    return {
        "system": request.system,
        "question": request.question,
        "chunks": [other.Chunk.model_validate(c.model_dump()) for c in request.chunks],
        "history": [other.Turn.model_validate(t.model_dump()) for t in request.history],
        "now": NOW,
    }


def main(argv: list[str] | None = None) -> int:
    args, workload = arguments(argv, __doc__, example="9e7a99a", repeat=21)
    encode = get_tokenizer("o200k_base").encoding.encode_ordinary
    with tempfile.TemporaryDirectory() as folder:
        theirs = core_at(args.revision, Path(folder))
        other = theirs["ctxbudget"]
        budget = workload.budget()
        with modules(theirs):
            their_assembler = other.ContextAssembler(
                tokenizer="o200k_base", budget=other.Budget.model_validate(budget.model_dump())
            )
        our_assembler = ctxbudget.ContextAssembler(tokenizer="o200k_base", budget=budget)
        names = (args.revision, "this tree")
        times: dict[str, list[float]] = {name: [] for name in names}
        encodes: list[float] = []
        same = True
        # Request 0 warms both up and is not timed.
        for index in range(args.repeat + 1):
            request = workload.request(index)
            copied = _copied(request, other)
            outputs = {}
            for name in names if index % 2 else names[::-1]:
                if name == "this tree":
                    began = time.process_time()
                    outputs[name] = request.assemble(our_assembler)
                    spent = time.process_time() - began
                else:
                    with modules(theirs):
                        began = time.process_time()
                        outputs[name] = their_assembler.assemble(**copied)
                        spent = time.process_time() - began
                if index:
                    times[name].append(spent)
            same &= len({fingerprint(o) for o in outputs.values()}) == 1
            began = time.process_time()
            encode(outputs["this tree"].text)
            if index:
                encodes.append(time.process_time() - began)
    return report(args.workload, encodes, times, same=same)


if __name__ == "__main__":
    sys.exit(main())
