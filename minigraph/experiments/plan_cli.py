"""`minigraph plan`: plan a CSV buffer problem or a zoo model, or check a plan CSV.

    minigraph plan problem.csv --planner ge [--time-limit S] [--alignment N] [-o plan.csv]
    minigraph plan --check plan.csv [problem.csv]
    minigraph plan --model resnet50 --batch 32 [--planner ge] [--order best]
                   [--inplace strict] [--colors 2 --coloring nnvm] [--safe]

It prints the number of buffers, the theoretical minimum, the arena, their ratio and the
planning time; for a model also the same plan in the counting every technique shares
(`memory/footprint.py`): workspace, working memory, the working minimum, the bytes
outside. `add_arguments(parser)` fills an argparse (sub)parser; `run(args)` returns the
exit status: 0 fine, 2 a user's mistake (a bad file, option value, planner or model
name), printed as one line with no traceback. A bad value is refused, never replaced.
`Parser` is an ArgumentParser whose usage errors are that one line too.

Planning that takes more than a second (anneal, ilp, search, or any planner on a big file)
draws a tqdm progress bar on stderr when stderr is a terminal (`progress_bar`, `ticking`);
stdout holds only the numbers, for pipes and tests.
"""

from __future__ import annotations

import argparse
import inspect
import math
import re
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TextIO

from tqdm import tqdm

from ..errors import MinigraphError, did_you_mean
from ..fromtorch.zoo import TORCH_MODELS
from ..memory.api import MAX_ALIGNMENT, MAX_COLORS, MemoryOptions, chosen, plan_memory
from ..memory.buffers import arena_size, theoretical_minimum, validate_offsets
from ..memory.csvio import CSVError, read_plan, read_problem, write_plan
from ..memory.inplace import merge_inplace
from ..memory.orders import ORDERS
from ..memory.planners import JOINT_PLANNERS, PLANNERS, TEXTBOOK, get_planner, plan_buffers
from ..models import MODELS, get_model

USAGE_ERROR = 2       # the exit status of a user's mistake (argparse's own convention)
PROGRESS_DELAY = 1.0  # seconds before a progress bar appears: quick work draws nothing


def progress_bar(total: float | None = None, desc: str = "", file: TextIO | None = None,
                 **kw: Any) -> tqdm:
    """A tqdm bar on `file` (stderr), drawn only when that is a terminal and only once the
    work has taken `PROGRESS_DELAY` seconds; stdout, which tests and pipes read, never
    sees it."""
    file = sys.stderr if file is None else file
    on_terminal = bool(getattr(file, "isatty", lambda: False)())
    return tqdm(total=total, desc=desc, file=file, delay=PROGRESS_DELAY, leave=False,
                disable=not on_terminal, dynamic_ncols=True, **kw)


@contextmanager
def ticking(desc: str, seconds: float | None = None, file: TextIO | None = None,
            tick: float = 0.1) -> Iterator[tqdm]:
    """A bar that follows the clock while a planner searches: against its time limit
    (`seconds`) when it has one, else the seconds so far. A planner reports no progress of
    its own, so the bar says how much of its budget is spent, not how close it is."""
    fmt = ("{desc}: {bar} {n:.1f}/{total:.1f} s" if seconds
           else "{desc}: {n:.1f} s")
    bar = progress_bar(seconds or None, desc, file, bar_format=fmt)
    stop = threading.Event()
    t0 = time.perf_counter()

    def follow() -> None:
        while not stop.wait(tick):
            now = time.perf_counter() - t0
            bar.update(min(now, seconds) - bar.n if seconds else now - bar.n)

    thread = threading.Thread(target=follow, daemon=True)
    if not bar.disable:
        thread.start()
    try:
        yield bar
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        bar.close()


def one_line(message: object) -> str:
    """`message` on one line: the CLI prints one line per mistake, never a traceback."""
    return "; ".join(x.strip() for x in str(message).splitlines() if x.strip())


_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")
_UNKNOWN = re.compile(r"unrecognized arguments: (.*)")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors print one line (`prog: error: ...`), exit 2.
    Options are never abbreviated (`--mod` is refused, not read as `--model`), and a
    misspelt option or choice gets a "did you mean" (difflib)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*args, **kw)

    def all_options(self) -> list[str]:
        """The option strings of this parser and of every subcommand's parser."""
        names = list(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    names += (sub.all_options() if isinstance(sub, Parser)
                              else list(sub._option_string_actions))
        return names

    def error(self, message: str) -> NoReturn:
        choice, unknown = _CHOICE.search(message), _UNKNOWN.search(message)
        if choice:
            names = re.findall(r"'([^']*)'", choice.group(2))
            cut = choice.end(1) + 1
            message = message[:cut] + did_you_mean(choice.group(1), names) + message[cut:]
        elif unknown:
            first = next((a for a in unknown.group(1).split() if a.startswith("-")), "")
            if first:
                message += did_you_mean(first.split("=")[0], self.all_options())
        self.exit(USAGE_ERROR, f"{self.prog}: error: {one_line(message)}\n")


# MAX_ALIGNMENT (1 GiB) and MAX_COLORS (64) are MemoryOptions' own maximums (memory/api.py).
MAX_BATCH = 2**20           # a batch of a million is far past any lesson's or benchmark's
MAX_SECONDS = 86_400.0      # a day: a longer search limit is a slip of the keyboard


def _short(text: str, width: int = 30) -> str:
    return text if len(text) <= width else f"{text[:width]}... ({len(text)} characters)"


def positive_int(text: str, maximum: int | None = None) -> int:
    """argparse type: an integer >= 1 (alignment, batch), at most `maximum` when given."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_short(repr(text))} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"{_short(text)} is above the maximum {maximum:,}")
    return value


def alignment(text: str) -> int:
    """argparse type: an alignment in bytes, 1 .. MAX_ALIGNMENT (1 GiB)."""
    return positive_int(text, MAX_ALIGNMENT)


def batch_size(text: str) -> int:
    """argparse type: a batch size, 1 .. MAX_BATCH."""
    return positive_int(text, MAX_BATCH)


def colour_classes(text: str) -> int:
    """argparse type: a number of colour classes, 1 .. MAX_COLORS."""
    return positive_int(text, MAX_COLORS)


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0 (nan or inf would never stop), at
    most MAX_SECONDS (a day)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_short(repr(text))} is not a number of "
                                         "seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number of seconds > 0")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{_short(text)} s is above the maximum "
                                         f"{MAX_SECONDS:,.0f} s (a day)")
    return value


def zoo_model(text: str) -> str:
    """argparse type: a zoo model's name. A PyTorch model's name (fromtorch.zoo) is refused
    with where it is (`minigraph tour --torch NAME`), any other with the closest name."""
    if text in MODELS:
        return text
    if text in TORCH_MODELS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a zoo model but a PyTorch one: minigraph tour --torch {text} "
            f"(the zoo: {', '.join(MODELS)})")
    raise argparse.ArgumentTypeError(f"invalid choice: {_short(repr(text))}"
                                     f"{did_you_mean(text, MODELS)} "
                                     f"(choose from {', '.join(map(repr, MODELS))})")


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("file", nargs="?", metavar="FILE.csv",
                        help="buffer problem: id,lower,upper,size (lifetime [lower, upper))")
    parser.add_argument("--planner", default=CLI_PLANNER,
                        help="planner name (none, refcount, ge-max, ge-binary, ge-hybrid, ge, "
                        f"greedy-size, bestfit, anneal, ilp, ...); default {CLI_PLANNER} (the "
                        f"one technique the command shows; MemoryOptions' default is "
                        f"{DEFAULTS.planner})")
    parser.add_argument("--time-limit", type=positive_seconds, default=None, metavar="S",
                        help="seconds for the search planners (ilp, anneal)")
    parser.add_argument("--alignment", type=alignment, default=None, metavar="N",
                        help="round sizes up to N bytes, at most 2**30 (default 1 for CSV, "
                        f"{DEFAULTS.alignment} for models, as MemoryOptions)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (anneal)")
    parser.add_argument("-o", "--output", metavar="PLAN.csv",
                        help="write the plan as id,lower,upper,size,offset")
    parser.add_argument("--check", metavar="PLAN.csv",
                        help="validate a plan CSV instead of planning; with FILE.csv also "
                        "that it places every buffer of that problem, no more, no fewer")
    parser.add_argument("--model", type=zoo_model, metavar="NAME",
                        help=f"plan a zoo model's training graph ({', '.join(MODELS)})")
    parser.add_argument("--batch", type=batch_size, default=32, help="batch size for --model")
    parser.add_argument("--order", default=None, choices=sorted(ORDERS), metavar="ORDER",
                        help=f"schedule for --model ({', '.join(sorted(ORDERS))}); default "
                        f"{DEFAULTS.order}")
    # The graph's own switches (MemoryOptions): they need a graph, so only with --model.
    parser.add_argument("--inplace", default=None, choices=INPLACE_RULES,
                        help="in-place rule for --model: off, last-reader (nnvm's rule) or "
                        "strict (the op is the input's only reader); default off")
    parser.add_argument("--colors", type=colour_classes, default=None, metavar="K",
                        help="parallel-safe sharing for --model: K colour classes kept apart")
    parser.add_argument("--coloring", default=None, choices=COLORINGS,
                        help="how --colors finds its paths (bytes or nnvm); default bytes")
    parser.add_argument("--safe", action="store_true", default=None,
                        help="for --model: share bytes only where the graph's edges order "
                        "the uses (zero parallel hazards)")
    return parser


INPLACE_RULES = ("off", "last-reader", "strict")
COLORINGS = ("bytes", "nnvm")
GRAPH_SWITCHES = ("inplace", "colors", "coloring", "safe")
# The one set of defaults is MemoryOptions() (docs/glossary.md "defaults"): the command
# takes every field from it but the planner, the technique it shows.
DEFAULTS = MemoryOptions()
CLI_PLANNER = "ge"


def _graph_switches(args: argparse.Namespace) -> dict:
    """The MemoryOptions fields given on the command line (off -> inplace=False)."""
    given = {k: getattr(args, k, None) for k in (*GRAPH_SWITCHES, "order", "alignment")}
    given = {k: v for k, v in given.items() if v is not None}
    if "inplace" in given:
        given["inplace"] = {"off": False, "last-reader": True}.get(given["inplace"],
                                                                   given["inplace"])
    return given


def _report(n: int, minimum: int, arena: int, seconds: float | None, note: str = "",
            no_reuse: int | None = None) -> None:
    ratio = arena / minimum if minimum else 1.0
    print(f"buffers             {n}")
    if no_reuse is not None:
        print(f"no reuse            {no_reuse} B")
    print(f"theoretical minimum {minimum} B")
    print(f"arena               {arena} B")
    print(f"ratio               {ratio:.4f}")
    if seconds is not None:
        print(f"time                {seconds * 1000:.1f} ms")
    if note:
        print(f"note                {note}")


def _planner_args(args: argparse.Namespace) -> dict:
    kw = {}
    if args.time_limit is not None:
        kw["time_limit"] = args.time_limit
    if args.seed is not None:
        kw["seed"] = args.seed
    return kw


def _budget(planner: str, kw: dict) -> float | None:
    """The seconds `planner` may search: the time limit given, else its own default."""
    if "time_limit" in kw:
        return kw["time_limit"]
    fn = JOINT_PLANNERS.get(planner) or get_planner(planner)    # a joint one plans a graph
    param = inspect.signature(fn).parameters.get("time_limit")
    default = None if param is None else param.default
    return float(default) if isinstance(default, (int, float)) and default > 0 else None


def check_against(plan: list, problem: list, plan_name: str, problem_name: str) -> None:
    """A plan places every buffer of its problem, no other, each with the problem's
    lifetime and at least its size; else CSVError naming the first buffer at fault. A plan
    cut short (a write killed midway) has fewer rows than its problem: refused here."""
    placed = {b.id: b for b in plan}
    missing = [b for b in problem if b.id not in placed]
    if missing:
        raise CSVError(f"{len(plan):,} buffers placed, the problem {problem_name} has "
                       f"{len(problem):,}: {len(missing):,} missing, the first buffer "
                       f"{missing[0].id} (a plan cut short?)", plan_name)
    wanted = {b.id for b in problem}
    extra = [b for b in plan if b.id not in wanted]
    if extra:
        raise CSVError(f"buffer {extra[0].id} is not in the problem {problem_name}", plan_name)
    for b in problem:
        p = placed[b.id]
        if (p.start, p.end) != (b.start, b.end) or p.size < b.size:
            raise CSVError(f"buffer {b.id}: lifetime [{p.start}, {p.end + 1}) size {p.size}, "
                           f"the problem {problem_name} has [{b.start}, {b.end + 1}) size "
                           f"{b.size}", plan_name)


def _check(args: argparse.Namespace) -> int:
    buffers, offsets = read_plan(args.check)
    validate_offsets(buffers, offsets)
    if args.file is not None:
        check_against(buffers, read_problem(args.file), args.check, args.file)
        print(f"{args.check}: every buffer of {args.file} placed")
    print(f"{args.check}: valid plan" + ("" if args.file is not None else
          " (of the buffers it lists: give its problem, --check PLAN.csv FILE.csv, to "
          "check that none is missing)"))
    _report(len(buffers), theoretical_minimum(buffers), arena_size(buffers, offsets), None,
            no_reuse=sum(b.size for b in buffers))
    return 0


def _plan_csv(args: argparse.Namespace) -> int:
    buffers = read_problem(args.file)
    get_planner(args.planner)          # load the planners (and fail early) before timing
    alignment = 1 if args.alignment is None else args.alignment
    kw = _planner_args(args)
    with ticking(f"{args.planner} on {len(buffers)} buffers", _budget(args.planner, kw)):
        t0 = time.perf_counter()
        aligned, placement = plan_buffers(buffers, args.planner, alignment, **kw)
        took = time.perf_counter() - t0
    print(f"{args.file}: planner {args.planner}, alignment {alignment}")
    _report(len(buffers), theoretical_minimum(aligned), placement.arena_bytes,
            took, placement.note, no_reuse=sum(b.size for b in aligned))
    if args.output:
        write_plan(args.output, aligned, placement.offsets)
        print(f"plan written to {args.output}")
    return 0


def model_options(args: argparse.Namespace) -> MemoryOptions:
    """`MemoryOptions()` with the planner and the switches given on the command line: no
    default of its own but the planner's (CLI_PLANNER)."""
    return DEFAULTS.replace(planner=args.planner, planner_args=_planner_args(args),
                            **_graph_switches(args))


def _plan_model(args: argparse.Namespace) -> int:
    graph = get_model(args.model, batch=args.batch).graph
    options = model_options(args)
    with ticking(f"{args.planner} on {args.model}",
                 _budget(args.planner, options.planner_args)):
        report = plan_memory(graph, options)
    rest = "".join(f", {k} {getattr(options, k)}" for k in ("order", "alignment")
                   if getattr(options, k) == getattr(DEFAULTS, k))
    print(f"{args.model} (batch {args.batch}): {len(graph.nodes)} nodes, "
          f"{chosen(options)}{rest}")
    _report(len(report.plan.offsets), report.theoretical_minimum, report.arena_bytes,
            report.seconds, report.plan.note, no_reuse=report.no_reuse_bytes)
    # the same plan in the one counting of every technique (memory/footprint.py)
    print(f"workspace           {report.workspace_bytes} B (the largest op's scratch, "
          f"beside the arena)")
    print(f"working             {report.working_bytes} B (arena + workspace; a DTR budget "
          f"counts the same)")
    print(f"working minimum     {report.working_minimum} B (bytes alive + the running "
          f"op's workspace, at the worst step)")
    print(f"outside             {report.outside_bytes} B (inputs, parameters, outputs)")
    if args.output:
        # An in-place chain is written as the one buffer it was planned as: its tensors
        # share bytes at the hand-over step, which a CSV (and --check) cannot express.
        merged, group = merge_inplace(report.plan.buffers(), report.plan.inplace)
        offsets = {gid: report.plan.offsets[name] for name, gid in group.items()}
        write_plan(args.output, merged, offsets)
        print(f"plan written to {args.output}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Do what the arguments ask; print the numbers. 0 on success; 2 on a user's mistake,
    printed as one line (an internal error still raises, with its traceback)."""
    chosen = [x for x in (args.file, args.check, args.model) if x is not None]
    checked = args.check is not None and args.model is None and len(chosen) == 2
    if len(chosen) != 1 and not checked:
        print("minigraph plan: error: give exactly one of FILE.csv, --check PLAN.csv "
              "[FILE.csv], --model NAME", file=sys.stderr)
        return USAGE_ERROR
    stray = [k for k in GRAPH_SWITCHES if getattr(args, k, None) is not None]
    if stray and args.model is None:
        print(f"minigraph plan: error: --{stray[0]} needs a graph: use it with --model NAME",
              file=sys.stderr)
        return USAGE_ERROR
    known = [*PLANNERS, *TEXTBOOK, *JOINT_PLANNERS]
    if args.check is None and args.planner not in known:
        print(f"minigraph plan: error: --planner: unknown planner {_short(repr(args.planner))}"
              f"{did_you_mean(args.planner, known)}; known: {', '.join(sorted(PLANNERS))}",
              file=sys.stderr)
        return USAGE_ERROR
    try:
        if args.check is not None:
            return _check(args)
        if args.model is not None:
            return _plan_model(args)
        return _plan_csv(args)
    except (MinigraphError, OSError) as e:      # OSError: -o into a missing folder
        print(f"minigraph plan: error: {one_line(e)}", file=sys.stderr)
        return USAGE_ERROR


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (`python -m minigraph.experiments.plan_cli ...`)."""
    parser = add_arguments(Parser(prog="minigraph plan", description=__doc__.splitlines()[0]))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
