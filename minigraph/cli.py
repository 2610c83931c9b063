"""The `minigraph` command: `tour`, `plan`, `models`, `lab`.

    minigraph tour [--model NAME] [--batch N]   one model end to end, with the memory table
    minigraph tour --torch NAME                 the same for a PyTorch model, imported
    minigraph plan ...                          plan a model or a buffer file (experiments/plan_cli)
    minigraph models                            the model zoo
    minigraph lab                               open the lessons in JupyterLab

A user's mistake (an unknown model, a bad option value, `--device gpu` with no GPU, a file
that is not a plan) prints one line, `minigraph ...: error: ...`, and exits 2; an internal
error keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .errors import MinigraphError
from .experiments import plan_cli
from .experiments.plan_cli import USAGE_ERROR, Parser, one_line, positive_int, positive_seconds
from .fromtorch.zoo import TORCH_MODELS, imported
from .models import MODELS
from .tour import TOUR_MODEL, tour


def _add_tour(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tour", help="build, run and plan one model; print the memory table",
                       description="Build a zoo model's training graph, run one SGD step, "
                                   "and plan its memory with every technique in turn.")
    p.add_argument("--model", default=None, choices=list(MODELS), metavar="NAME",
                   help=f"zoo model: {', '.join(MODELS)} (default {TOUR_MODEL})")
    p.add_argument("--torch", default=None, choices=list(TORCH_MODELS), metavar="NAME",
                   help=f"a model written in PyTorch, imported with from_torch (needs "
                        f"pip install 'minigraph[torch]'): {', '.join(TORCH_MODELS)}")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="batch size, >= 1 (default: the model's own)")
    p.add_argument("--time-limit", type=positive_seconds, default=0.5,
                   help="seconds for each searching planner (anneal, ilp, search); "
                        "default 0.5")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"),
                   help="where to run the step (default cpu)")
    p.add_argument("--run", dest="run", action="store_true", default=None,
                   help="run the SGD step even for a big model")
    p.add_argument("--no-run", dest="run", action="store_false",
                   help="plan only, do not run a step")
    p.set_defaults(func=_run_tour)


def _run_tour(args: argparse.Namespace) -> int:
    if args.torch is None:
        tour(args.model, batch=args.batch, time_limit=args.time_limit, device=args.device,
             run=args.run)
        return 0
    if args.model is not None:
        print("minigraph tour: error: give --model or --torch, not both", file=sys.stderr)
        return USAGE_ERROR
    # no PyTorch: TorchMissingError, a MinigraphError: one line and exit 2 (main)
    model = imported(args.torch, **({} if args.batch is None else {"batch": args.batch}))
    tour(model, time_limit=args.time_limit, device=args.device, run=args.run)
    return 0


def _add_models(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the model zoo")
    p.add_argument("--build", action="store_true",
                   help="build each default model and print its size (takes a few seconds)")
    p.set_defaults(func=_run_models)


def _run_models(args: argparse.Namespace) -> int:
    for name, builder in MODELS.items():
        doc = " ".join((builder.__doc__ or "").split())
        doc = doc.split(". ")[0].rstrip(".")
        mark = " (the tour's default)" if name == TOUR_MODEL else ""
        print(f"{name:12} {doc}{mark}")
        if args.build:
            print(f"{'':12} {builder().summary()}")
    return 0


def _add_plan(sub: argparse._SubParsersAction) -> None:
    # Parsed by experiments/plan_cli.py itself.
    sub.add_parser("plan", help="plan a graph's memory (see `minigraph plan --help`)",
                   add_help=False, prefix_chars="\0").add_argument(
        "rest", nargs=argparse.REMAINDER)


def _run_plan(rest: Sequence[str]) -> int:
    parser = Parser(prog="minigraph plan", description="Plan a graph's memory and print the plan.")
    plan_cli.add_arguments(parser)
    return int(plan_cli.run(parser.parse_args(list(rest))) or 0)


def _add_lab(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lab", help="open lessons/00_tour.ipynb in JupyterLab")
    p.add_argument("notebook", nargs="?", default=None,
                   help="notebook to open (default lessons/00_tour.ipynb)")
    p.set_defaults(func=_run_lab)


def _lessons_dir() -> Path:
    """lessons/ next to the package (a source checkout), else in the working directory."""
    here = Path(__file__).resolve().parent.parent / "lessons"
    return here if here.is_dir() else Path.cwd() / "lessons"


def lab_command(notebook: Path, python: str | None = None,
                root: bool | None = None) -> list[str]:
    """The command that opens `notebook` in JupyterLab: the JupyterLab of the interpreter
    running minigraph (`.venv/bin/minigraph lab` works with the venv not activated), with
    `--allow-root` when run as root (JupyterLab refuses to start as root without it)."""
    python = sys.executable if python is None else python
    if root is None:
        root = hasattr(os, "geteuid") and os.geteuid() == 0
    return [python, "-m", "jupyterlab", *(["--allow-root"] if root else []), str(notebook)]


def _run_lab(args: argparse.Namespace) -> int:
    nb = Path(args.notebook) if args.notebook else _lessons_dir() / "00_tour.ipynb"
    if not nb.exists():
        print(f"minigraph lab: error: {nb} not found; run it from a minigraph checkout "
              "(git clone ... && cd minigraph && minigraph lab)", file=sys.stderr)
        return USAGE_ERROR
    if importlib.util.find_spec("jupyterlab") is None:
        print(f"minigraph lab: error: JupyterLab is not installed for {sys.executable}; "
              "pip install 'minigraph[lab]'", file=sys.stderr)
        return USAGE_ERROR
    try:
        return subprocess.call(lab_command(nb))
    except KeyboardInterrupt:      # Ctrl-C stops JupyterLab; not an error of ours
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minigraph",
        description="minigraph: computation graphs, explicit backward graphs, and memory "
                    "planning you can switch on and off.")
    parser.add_argument("--version", action="version", version=f"minigraph {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{tour,plan,models,lab}")
    _add_tour(sub)
    _add_plan(sub)
    _add_models(sub)
    _add_lab(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "plan":
        return _run_plan(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except MinigraphError as e:      # a user's mistake found past the parser: one line
        print(f"minigraph {args.command}: error: {one_line(e)}", file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:          # `minigraph models | head`: not an error
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
