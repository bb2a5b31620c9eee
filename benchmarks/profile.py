"""Where one assembly's time goes: pyinstrument over repeated assemblies of one workload.

    python -m benchmarks.profile                                  # 200 candidates, ingest counts
    python -m benchmarks.profile "10000 candidates, no counts" --repeat 10

Needs pyinstrument (in the bench extra). Inputs are fresh per assembly, as in compare.py.
"""

from __future__ import annotations

import argparse

from benchmarks.workloads import WORKLOADS, budget
from ctxbudget import ContextAssembler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", nargs="?", default="200 candidates, ingest counts")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    try:
        from pyinstrument import Profiler
    except ImportError:
        raise SystemExit("pyinstrument is not installed: pip install --group bench") from None
    workload = WORKLOADS[args.workload]
    requests = [workload.request(seed) for seed in range(args.repeat + 1)]
    assembler = ContextAssembler(tokenizer="o200k_base", budget=budget())

    def assemble(index: int) -> None:
        requests[index].assemble(assembler)

    assemble(0)  # the first request fills the caches an app keeps warm
    profiler = Profiler(interval=0.0002)
    profiler.start()
    for index in range(1, args.repeat + 1):
        assemble(index)
    profiler.stop()
    print(profiler.output_text(unicode=True, color=False))


if __name__ == "__main__":
    main()
