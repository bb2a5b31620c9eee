"""``ctxbudget eval position|knee|ablation``: the experiments from the command line.

Cases and chunks come from JSONL files (`load_cases`, `load_chunks`), or from
`synthetic_corpus` with ``--simulate``; the model is an import path or the simulator.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxbudget import Chunk, CtxBudgetError
from ctxbudget.eval._ablation import FIELDS, ablation
from ctxbudget.eval._cases import Case, load_cases, load_chunks
from ctxbudget.eval._errors import EvalError
from ctxbudget.eval._knee import k_knee
from ctxbudget.eval._model import Model, cached, from_langchain, from_llamaindex
from ctxbudget.eval._position import position_sensitivity
from ctxbudget.eval._result import Result
from ctxbudget.eval._retrieve import lexical_retriever
from ctxbudget.eval._simulate import simulated_generator, synthetic_corpus

__all__ = ["cli_main", "load_model"]


def cli_main(argv: Sequence[str] | None = None, *, prog: str = "ctxbudget eval") -> int:
    """Run one experiment and print its table; returns the exit code.

    Errors a user can fix (a bad case file, a model that cannot be imported, ``--plot``
    without matplotlib, checked before any call) are printed as one line,
    ``ctxbudget eval: <what to change>``, with exit code 1.
    """
    args = _parser(prog).parse_args(argv)
    try:
        if args.plot is not None:
            _check_plot()
        _check_outputs(args.csv, args.plot)
        result = _run(args)
    except (CtxBudgetError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1
    print(result.to_json() if args.json else result)
    try:
        if args.csv is not None:
            result.to_csv(args.csv)
        if args.plot is not None:
            result.plot(args.plot)
    except OSError as exc:
        print(f"{prog}: the table above could not be written: {exc}", file=sys.stderr)
        return 1
    return 0


def load_model(path: str, *, model_id: str | None = None) -> Model:
    """The model named by ``module:attribute``: a LangChain chat model or LLM (it has
    ``invoke``), a LlamaIndex LLM (``complete``), or a function prompt -> answer.

    The current directory is importable, so ``mymodels:ask`` finds ``./mymodels.py``.
    """
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise EvalError(f"--model must be module:attribute, e.g. mymodels:chat, but got {path!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module_name)
        for name in attribute.split("."):
            found = getattr(found, name)
    except (ImportError, AttributeError) as exc:
        raise EvalError(f"cannot load --model {path}: {exc}") from None
    if callable(getattr(found, "invoke", None)):
        return from_langchain(found, model_id=model_id)
    if callable(getattr(found, "complete", None)):
        return from_llamaindex(found, model_id=model_id)
    if callable(found):
        return Model(found, model_id=path if model_id is None else model_id)
    raise EvalError(
        f"--model {path} is a {type(found).__name__}; name a LangChain chat model, a "
        "LlamaIndex LLM or a function that takes the prompt and returns the answer"
    )


def _check_plot() -> None:
    """Refuse --plot before the experiment runs (its calls may cost money) when
    `Result.plot` could not draw: it imports the same module."""
    try:
        importlib.import_module("matplotlib.figure")
    except ImportError:
        raise EvalError(
            "--plot needs matplotlib: pip install 'ctxbudget[plot]' (or leave out --plot)"
        ) from None


def _check_outputs(*paths: Path | None) -> None:
    """Refuse --csv or --plot into a folder that does not exist before the experiment runs,
    rather than after its calls were paid for."""
    for path in paths:
        if path is not None and not path.resolve().parent.is_dir():
            raise EvalError(
                f"cannot write {str(path)!r}: the folder {str(path.resolve().parent)!r} does not "
                "exist; create it or name a file in an existing folder"
            )


def _run(args: argparse.Namespace) -> Result:
    cases, pool = _corpus(args)
    generate: Callable[[str], str]
    if args.simulate:
        generate = simulated_generator(bias=args.bias, seed=args.seed)
    else:
        generate = load_model(args.model, model_id=args.model_id)
    if args.cache is not None:
        generate = cached(generate, args.cache, model_id=args.model_id)
    common: dict[str, Any] = {
        "workers": args.workers,
        "progress": False if args.no_progress else None,
        "seed": args.seed,
    }
    if args.experiment == "position":
        return position_sensitivity(
            generate,
            cases,
            pool,
            sizes=args.sizes,
            positions=args.positions,
            distractors=args.distractors,
            **common,
        )
    retrieve = lexical_retriever(pool)
    if args.experiment == "knee":
        return k_knee(generate, cases, retrieve, ks=args.ks, **common)
    return ablation(generate, cases, retrieve, fields=args.fields, k=args.k, **common)


def _corpus(args: argparse.Namespace) -> tuple[list[Case], list[Chunk]]:
    if args.cases is None and args.chunks is None:
        if not args.simulate:
            raise EvalError(
                "--cases and --chunks are required (only --simulate has a built-in corpus)"
            )
        return synthetic_corpus(seed=args.seed)
    if args.cases is None or args.chunks is None:
        raise EvalError("give both --cases and --chunks: the cases name their gold chunks by id")
    pool = load_chunks(args.chunks)
    return load_cases(args.cases, pool), pool


def _parser(prog: str) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    data = common.add_argument_group("data")
    data.add_argument("--cases", type=Path, help="JSONL: question, keywords, gold (chunk ids)")
    data.add_argument("--chunks", type=Path, help="JSONL: one Chunk per line (gold and pool)")
    model = common.add_argument_group("model").add_mutually_exclusive_group(required=True)
    model.add_argument(
        "--model",
        help="module:attribute naming a LangChain chat model, a LlamaIndex LLM or a function "
        "prompt -> answer",
    )
    model.add_argument(
        "--simulate",
        action="store_true",
        help="a deterministic position-biased simulator instead of a model (no API key); "
        "without --cases/--chunks it runs on a synthetic corpus",
    )
    common.add_argument("--bias", type=float, default=0.4, help="the simulator's middle miss rate")
    common.add_argument("--model-id", help="the id cached answers are stored under")
    common.add_argument("--cache", type=Path, help="keep answers in DIR/answers.sqlite3")
    common.add_argument("--workers", type=int, default=4, help="concurrent calls (default 4)")
    common.add_argument("--seed", type=int, default=0, help="seed of draws and bootstrap")
    common.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    output = common.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print the result as JSON")
    output.add_argument("--csv", type=Path, help="also write the cells as CSV to this file")
    output.add_argument("--plot", type=Path, help="also draw a PNG here (needs matplotlib)")

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Measure position sensitivity, the k knee or metadata ablation on your model "
        "(token counts: o200k_base).",
    )
    experiments = parser.add_subparsers(dest="experiment", required=True, metavar="experiment")
    position = experiments.add_parser(
        "position", parents=[common], help="the answer at each position among N sources"
    )
    position.add_argument("--sizes", type=_ints, default=(6, 20, 60), help="e.g. 6,20,60")
    position.add_argument(
        "--positions", type=_floats, default=(0, 0.25, 0.5, 0.75, 1), help="e.g. 0,0.5,1"
    )
    position.add_argument("--distractors", choices=("random", "adjacent"), default="random")
    knee = experiments.add_parser("knee", parents=[common], help="correctness and tokens per k")
    knee.add_argument("--ks", type=_ints, default=(3, 4, 6, 8, 12, 20), help="e.g. 3,6,12")
    ablate = experiments.add_parser(
        "ablation", parents=[common], help="correctness with and without each header field"
    )
    ablate.add_argument(
        "--fields", type=_names, default=FIELDS, help=f"comma-separated, of: {','.join(FIELDS)}"
    )
    ablate.add_argument("--k", type=int, default=6, help="chunks sent per question (default 6)")
    return parser


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 6,20,60, got {text!r}") from None


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 0,0.5,1, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(","))
