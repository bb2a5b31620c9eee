"""`python -m ctxbudget` / `ctxbudget`: assemble the built-in example and show prompt and report."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib.metadata import version

from ctxbudget import _demo
from ctxbudget._assemble import ContextAssembler
from ctxbudget._budget import Budget, Claimant
from ctxbudget._errors import CtxBudgetError

# The parts of a prompt the demo sends besides system and question, which every budget has.
_DEMO_SENDS: tuple[Claimant, ...] = ("retrieved", "examples", "tools", "history")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the offline demo; returns the process exit code.

    Errors a user can fix (a bad budget file, an unknown model) are printed to stderr as
    one line, ``ctxbudget: <what to change>``, with exit code 1.
    """
    parser = argparse.ArgumentParser(
        prog="ctxbudget",
        description="Assemble the built-in support example under a token budget and print "
        "the prompt and its report.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--model", default="gpt-4o", help="model or tiktoken encoding name")
    parser.add_argument(
        "--budget", help="a budget file (.json or .toml); default: Budget.default()"
    )
    parser.add_argument("--total", type=int, help="override the budget's total tokens")
    parser.add_argument("--json", action="store_true", help="print the report as JSON only")
    args = parser.parse_args(argv)
    if args.version:
        print(f"ctxbudget {version('ctxbudget')}")
        return 0

    try:
        budget = (
            Budget.from_file(args.budget, needs=_DEMO_SENDS) if args.budget else Budget.default()
        )
        if args.total is not None:
            budget = Budget.parse({**budget.model_dump(), "total": args.total})
        assembler = ContextAssembler(budget=budget, tokenizer=args.model)
        result = assembler.assemble(
            system=_demo.SYSTEM,
            examples=_demo.EXAMPLES,
            tools=_demo.TOOLS,
            history=_demo.HISTORY,
            chunks=_demo.CHUNKS,
            question=_demo.QUESTION,
            now=_demo.NOW,
        )
    except (CtxBudgetError, OSError) as exc:
        print(f"ctxbudget: {exc}", file=sys.stderr)
        return 1

    report = result.report.model_dump(mode="json")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    rule = "─" * 72
    print(f"{rule}\nPROMPT ({report['total']:,} of {report['budget']:,} tokens)\n{rule}")
    print(result.text)
    print(f"{rule}\nSOURCES\n{rule}")
    for source in result.sources:
        print(f"[{source.n}] {source.chunk.id}  (document {source.chunk.document_id})")
    print(f"{rule}\nREPORT\n{rule}")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
