"""The `minigraph` command: `tour`, `plan`, `models`, `estimate`, `lab`.

    minigraph tour [--model NAME] [--batch N]   one model end to end, with the memory table
    minigraph tour --torch NAME                 the same for a PyTorch model, imported
    minigraph plan ...                          plan a model or a buffer file (experiments/plan_cli)
    minigraph models                            the model zoo
    minigraph estimate PKG.MOD:FACTORY --shape 32x3x224x224 [--dtype float32] [--inference]
                                                every technique's bytes for your model at its
                                                real size, from shapes alone (meta device)
    minigraph lab [NOTEBOOK] [JUPYTER OPTIONS]  open the lessons in JupyterLab

A user's mistake (an unknown model, a bad option value, `--device gpu` with no GPU, a file
that is not a plan) prints one line, `minigraph ...: error: ...`, and exits 2; an internal
error keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .errors import ArgumentError, MinigraphError, did_you_mean
from .experiments import plan_cli
from .experiments.estimate import estimate
from .experiments.plan_cli import (
    USAGE_ERROR,
    Parser,
    batch_size,
    one_line,
    positive_int,
    positive_seconds,
    zoo_model,
)
from .fromtorch.factory import meta_import
from .fromtorch.zoo import TORCH_MODELS, imported
from .models import MODELS
from .tour import TOUR_MODEL, tour


def torch_model(text: str) -> str:
    """argparse type: a PyTorch model of fromtorch.zoo; a zoo model's name is refused with
    where it is (`--model NAME`), any other with the closest name."""
    if text in TORCH_MODELS:
        return text
    if text in MODELS:
        raise argparse.ArgumentTypeError(f"{text!r} is a model of minigraph's own zoo, not a "
                                         f"PyTorch one: minigraph tour --model {text}")
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r}"
                                     f"{did_you_mean(text, TORCH_MODELS)} (choose from "
                                     f"{', '.join(map(repr, TORCH_MODELS))})")


def _add_tour(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tour", help="build, run and plan one model; print the memory table",
                       description="Build a zoo model's training graph, run one SGD step, "
                                   "and plan its memory with every technique in turn.")
    p.add_argument("--model", default=None, type=zoo_model, metavar="NAME",
                   help=f"zoo model: {', '.join(MODELS)} (default {TOUR_MODEL})")
    p.add_argument("--torch", default=None, type=torch_model, metavar="NAME",
                   help=f"a model written in PyTorch, imported with from_torch (needs "
                        f"pip install 'minigraph[torch]'): {', '.join(TORCH_MODELS)}")
    p.add_argument("--batch", type=batch_size, default=None,
                   help="batch size, >= 1 (default: the model's own)")
    p.add_argument("--time-limit", type=positive_seconds, default=0.5,
                   help="seconds for each searching planner (anneal, ilp, search); "
                        "default 0.5")
    p.add_argument("--ilp-max-buffers", type=positive_int, default=60, metavar="N",
                   help="plan with the ILP only up to N buffers (default 60; it grows fast)")
    p.add_argument("--anneal-max-buffers", type=positive_int, default=2000, metavar="N",
                   help="plan with annealing only up to N buffers (default 2000)")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu", "auto"),
                   help="where to run the step (default cpu)")
    p.add_argument("--run", dest="run", action="store_true", default=None,
                   help="run the SGD step even for a big model")
    p.add_argument("--no-run", dest="run", action="store_false",
                   help="plan only, do not run a step")
    p.set_defaults(func=_run_tour)


def _limits(args: argparse.Namespace) -> dict:
    return {"ilp_max_buffers": args.ilp_max_buffers,
            "anneal_max_buffers": args.anneal_max_buffers}


def _run_tour(args: argparse.Namespace) -> int:
    if args.torch is None:
        tour(args.model, batch=args.batch, time_limit=args.time_limit, device=args.device,
             run=args.run, **_limits(args))
        return 0
    if args.model is not None:
        print("minigraph tour: error: give --model or --torch, not both", file=sys.stderr)
        return USAGE_ERROR
    # no PyTorch: TorchMissingError, a MinigraphError: one line and exit 2 (main)
    model = imported(args.torch, **({} if args.batch is None else {"batch": args.batch}))
    tour(model, time_limit=args.time_limit, device=args.device, run=args.run,
         **_limits(args))
    return 0


def _add_estimate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("estimate", help="what each technique holds for your PyTorch model at "
                                        "its real size, from shapes alone",
                       description="Build package.module:factory on PyTorch's meta device "
                                   "(no weight allocated), import it at the given input "
                                   "shapes and plan it with every technique; DTR simulated "
                                   "at 24, 40 and 80 GB. Training (one SGD step, loss the "
                                   "mean of the first output) unless --inference.")
    p.add_argument("factory", metavar="PKG.MOD:FACTORY",
                   help="a callable that builds the torch.nn.Module, e.g. mypkg.nets:resnet")
    p.add_argument("--shape", action="append", default=[], metavar="NxCx...",
                   help="an input's shape, once per input; 1x512:int64 for token ids")
    p.add_argument("--dtype", default="float32",
                   help="the weights' and the inputs' dtype (default float32)")
    p.add_argument("--inference", action="store_true",
                   help="the forward pass alone (eval mode), no backward, no update")
    p.set_defaults(func=_run_estimate)


def _run_estimate(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    model = meta_import(args.factory, args.shape, args.dtype, args.inference)
    g = model.graph
    mode = "inference" if args.inference else "training"
    est = estimate(model.name, mode, g, progress=lambda it: tqdm(
        it, desc=f"planning {len(g.nodes)} nodes", file=sys.stderr, leave=False,
        disable=len(g.nodes) < 200))
    print("\n".join(est.lines()))
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


LAB_USAGE = "minigraph lab [NOTEBOOK] [JUPYTER OPTIONS ...] [-- JUPYTER ARGUMENTS ...]"
LAB_HELP = """Open a notebook (default lessons/00_tour.ipynb) in JupyterLab, the JupyterLab of the
Python that runs minigraph.

Every other option is JupyterLab's own and is passed to it unchanged, e.g.

  minigraph lab --no-browser --port 8890 --ip 0.0.0.0     (a course server)
  minigraph lab lessons/07_dtr.ipynb --ServerApp.token=SECRET
  minigraph lab -- --help-all                             (everything after -- goes
                                                           to JupyterLab verbatim)

(all of them: python -m jupyterlab --help-all). Ctrl-C, SIGTERM and SIGHUP end
JupyterLab and its kernels: JupyterLab is asked to stop (it shuts its kernels down), and
whatever is left after LAB_GRACE seconds is killed.
"""
LAB_GRACE = 15.0      # seconds JupyterLab gets to shut its kernels down before a SIGKILL
# JupyterLab's options that take no value (LabApp.flags), when jupyterlab cannot be asked
LAB_FLAGS = frozenset({
    "allow-root", "autoreload", "collaborative", "core-mode", "custom-css", "debug",
    "dev-mode", "expose-app-in-browser", "extensions-in-dev-mode", "generate-config",
    "no-browser", "no-script", "script", "show-config", "show-config-json",
    "skip-dev-build", "splice-source", "watch", "y"})


def _add_lab(sub: argparse._SubParsersAction) -> None:
    # Parsed by split_lab_args: JupyterLab's own options pass through.
    sub.add_parser("lab", help="open lessons/00_tour.ipynb in JupyterLab (JupyterLab's "
                   "options pass through; see `minigraph lab --help`)",
                   add_help=False, prefix_chars="\0").add_argument(
        "rest", nargs=argparse.REMAINDER)


def _lab_flags() -> frozenset[str]:
    """The JupyterLab options that take no value (so `--no-browser x.ipynb` keeps its
    notebook); JupyterLab's own list when it can be read, else LAB_FLAGS."""
    try:
        from jupyterlab.labapp import LabApp  # imported here: seconds, and only for lab
    except Exception:                           # noqa: BLE001  (an old or broken install)
        return LAB_FLAGS
    return frozenset(LabApp.flags) | LAB_FLAGS


def split_lab_args(argv: Sequence[str], flags: frozenset[str] = LAB_FLAGS
                   ) -> tuple[str | None, list[str]]:
    """(the notebook, JupyterLab's arguments) of `minigraph lab ...`: a word not starting
    with "-" (and not an option's value) is the notebook; an option is JupyterLab's, with
    its value (`--port 8890` or `--port=8890`) unless it is one of `flags`; everything
    after `--` is JupyterLab's unchanged."""
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    before, after = argv[:cut], argv[cut + 1:]
    notebook, out, i = None, [], 0
    while i < len(before):
        a = before[i]
        if a.startswith("-") and a != "-":
            out.append(a)
            takes_value = "=" not in a and a.lstrip("-") not in flags
            nxt = before[i + 1] if i + 1 < len(before) else None
            if takes_value and nxt is not None and not nxt.startswith("-") \
                    and not nxt.endswith(".ipynb"):
                out.append(nxt)
                i += 1
        elif notebook is None:
            notebook = a
        else:
            raise ArgumentError(f"minigraph lab: two notebooks, {notebook!r} and {a!r}; "
                                "open one (JupyterLab opens the others from its file browser)")
        i += 1
    return notebook, out + after


def _lessons_dir() -> Path:
    """lessons/ next to the package (a source checkout), else in the working directory."""
    here = Path(__file__).resolve().parent.parent / "lessons"
    return here if here.is_dir() else Path.cwd() / "lessons"


def lab_command(notebook: Path, python: str | None = None, root: bool | None = None,
                extra: Sequence[str] = ()) -> list[str]:
    """The command that opens `notebook` in JupyterLab: the JupyterLab of the interpreter
    running minigraph (`.venv/bin/minigraph lab` works with the venv not activated), with
    `--allow-root` when run as root (JupyterLab refuses to start as root without it), then
    `extra`, JupyterLab's own options."""
    python = sys.executable if python is None else python
    if root is None:
        root = hasattr(os, "geteuid") and os.geteuid() == 0
    return [python, "-m", "jupyterlab", *(["--allow-root"] if root else []), *extra,
            str(notebook)]


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, grandchildren, ...), read from /proc (Linux);
    [] where there is no /proc. Kernels start in sessions of their own (jupyter_client),
    so a process group does not hold them: they are found here."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()      # the name may hold spaces
        parent[int(entry.name)] = int(fields[1])
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        found += kids
        todo += kids
    return found


def _started(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc), None if it is gone: a
    process is the one recorded only if both its number and its start match."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


class _Stop(Exception):
    """A signal that ends `minigraph lab` (SIGINT, SIGTERM, SIGHUP)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signum)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process_tree(proc: subprocess.Popen, grace: float = LAB_GRACE) -> None:
    """End `proc` (started in a session of its own) and everything it started: SIGTERM to
    its process group (JupyterLab then shuts its kernels down), SIGKILL to the group after
    `grace` seconds or at a second signal, then SIGKILL to any descendant still alive."""
    if not hasattr(os, "killpg"):       # Windows: no process groups to signal
        proc.terminate()
        proc.wait()
        return
    below = {pid: _started(pid) for pid in descendants(proc.pid)}
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (_Stop, subprocess.TimeoutExpired):
        pass
    except ProcessLookupError:
        pass
    finally:
        for pid in [proc.pid, *below]:
            if pid != proc.pid and _started(pid) != below[pid]:
                continue                    # gone, and its number taken by another process
            try:
                if pid == proc.pid or os.getpgid(pid) == pid:    # a group (session) leader
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        proc.wait()


def _run_lab(argv: Sequence[str]) -> int:
    if any(a in ("-h", "--help") for a in argv[:argv.index("--") if "--" in argv else None]):
        print(f"usage: {LAB_USAGE}\n\n{LAB_HELP}".replace("LAB_GRACE", f"{LAB_GRACE:.0f}"))
        return 0
    if importlib.util.find_spec("jupyterlab") is None:
        print(f"minigraph lab: error: JupyterLab is not installed for {sys.executable}; "
              "pip install 'minigraph[lab]'", file=sys.stderr)
        return USAGE_ERROR
    options = [a for a in argv if a.startswith("-")]
    notebook, extra = split_lab_args(argv, _lab_flags() if options else LAB_FLAGS)
    nb = Path(notebook) if notebook else _lessons_dir() / "00_tour.ipynb"
    if not nb.exists():
        print(f"minigraph lab: error: {nb} not found; run it from a minigraph checkout "
              "(git clone ... && cd minigraph && minigraph lab)", file=sys.stderr)
        return USAGE_ERROR
    ends = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s]
    before = {s: signal.signal(s, _raise_stop) for s in ends}
    try:
        try:
            proc = subprocess.Popen(lab_command(nb, extra=extra), start_new_session=True)
        except _Stop as stop:
            return 128 + stop.signum
        try:
            return proc.wait()
        except _Stop as stop:        # Ctrl-C, SIGTERM, SIGHUP: not an error of ours
            stop_process_tree(proc)
            return 128 + stop.signum
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="minigraph",
        description="minigraph: computation graphs, explicit backward graphs, and memory "
                    "planning you can switch on and off.")
    parser.add_argument("--version", action="version", version=f"minigraph {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{tour,plan,models,estimate,lab}")
    _add_tour(sub)
    _add_plan(sub)
    _add_models(sub)
    _add_estimate(sub)
    _add_lab(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "plan":
        return _run_plan(argv[1:])
    if argv and argv[0] == "lab":
        try:
            return _run_lab(argv[1:])
        except MinigraphError as e:
            print(f"minigraph lab: error: {one_line(e)}", file=sys.stderr)
            return USAGE_ERROR
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
