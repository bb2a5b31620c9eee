"""Near-duplicate detection A/B: this tree's `Deduplicator` against another revision's.

The other revision's ``core/ctxbudget/_sources/dedup.py`` is read from git and loaded
beside this one; each request is assembled with both, in alternating order, in one
process, with the rest of the core unchanged, so only dedup differs. Prints CPU-time
medians as ratios to one encode of the prompt, and whether both gave the same prompt and
drops on every request (they must: speed work never changes a verdict).

    python -m benchmarks.ab_dedup f62c0fc "2,000 candidates, 1M window, ingest counts"
    python -m benchmarks.ab_dedup f62c0fc "200 candidates, ingest counts" --repeat 41
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from benchmarks.workloads import FOLLOWUPS, WINDOW_WORKLOADS, WORKLOADS, Workload
from ctxbudget import Assembled, ContextAssembler, get_tokenizer
from ctxbudget._sources import claim

DEDUP = "core/ctxbudget/_sources/dedup.py"


def dedup_at(revision: str, folder: Path) -> ModuleType:
    """`revision`'s dedup module, loaded from a copy of its file."""
    source = subprocess.run(
        ["git", "show", f"{revision}:{DEDUP}"], check=True, capture_output=True, text=True
    ).stdout
    path = folder / "dedup_at_revision.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("dedup_at_revision", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fingerprint(result: Assembled) -> str:
    return hashlib.sha256((result.text + repr(result.report.dropped)).encode()).hexdigest()


def arguments(
    argv: list[str] | None, doc: str | None, *, example: str, repeat: int
) -> tuple[argparse.Namespace, Workload]:
    """An A/B script's command line (revision, workload, --repeat) and the workload it names."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("revision", help=f"the git revision to compare with, e.g. {example}")
    parser.add_argument("workload", help="a workload name from benchmarks/workloads.py")
    parser.add_argument(
        "--repeat", type=int, default=repeat, help=f"requests measured (default {repeat})"
    )
    args = parser.parse_args(argv)
    workloads = {**WORKLOADS, **WINDOW_WORKLOADS, **FOLLOWUPS}
    if args.workload not in workloads:
        parser.error(f"unknown workload; one of: {', '.join(workloads)}")
    return args, workloads[args.workload]


def report(
    workload: str, encodes: list[float], times: dict[str, list[float]], *, same: bool
) -> int:
    """Print the medians as ratios to one encode of the prompt; the exit status (1 when the
    two gave different prompts or drops on any request)."""
    one = statistics.median(encodes)
    print(f"{workload}: one encode {one * 1e3:.2f} ms, medians of {len(encodes)}")
    for name, spent in times.items():
        median = statistics.median(spent)
        print(f"  {name:>12}: {median * 1e3:8.2f} ms = {median / one:6.2f}x encode")
    print(f"  same prompts and drops on every request: {same}")
    return 0 if same else 1


def main(argv: list[str] | None = None) -> int:
    args, workload = arguments(argv, __doc__, example="f62c0fc", repeat=5)
    encode = get_tokenizer("o200k_base").encoding.encode_ordinary
    with tempfile.TemporaryDirectory() as folder:
        versions = {
            args.revision: dedup_at(args.revision, Path(folder)).Deduplicator,
            "this tree": claim.Deduplicator,
        }
        assemblers = {
            name: ContextAssembler(tokenizer="o200k_base", budget=workload.budget())
            for name in versions
        }
        times: dict[str, list[float]] = {name: [] for name in versions}
        encodes: list[float] = []
        same = True
        # Request 0 warms both up and is not timed.
        for index in range(args.repeat + 1):
            request = workload.request(index)
            order = list(versions) if index % 2 else list(versions)[::-1]
            outputs = {}
            for name in order:
                claim.Deduplicator = versions[name]  # type: ignore[misc]
                began = time.process_time()
                outputs[name] = request.assemble(assemblers[name])
                spent = time.process_time() - began
                if index:
                    times[name].append(spent)
            claim.Deduplicator = versions["this tree"]  # type: ignore[misc]
            same &= len({fingerprint(o) for o in outputs.values()}) == 1
            began = time.process_time()
            encode(outputs["this tree"].text)
            if index:
                encodes.append(time.process_time() - began)
    return report(args.workload, encodes, times, same=same)


if __name__ == "__main__":
    sys.exit(main())
