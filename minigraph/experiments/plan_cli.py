"""`minigraph plan`: plan a CSV buffer problem or a zoo model, or check a plan CSV.

    minigraph plan problem.csv --planner ge [--time-limit S] [--alignment N] [-o plan.csv]
    minigraph plan --check plan.csv
    minigraph plan --model resnet50 --batch 32 [--planner ge] [--order best]

It prints the number of buffers, the theoretical minimum, the arena, their ratio and the
planning time. `add_arguments(parser)` fills an argparse (sub)parser; `run(args)` returns
the exit status (0 fine, 1 an error that it prints).
"""

from __future__ import annotations

import argparse
import sys
import time

from ..errors import MinigraphError
from ..memory.api import MemoryOptions, plan_memory
from ..memory.buffers import arena_size, theoretical_minimum, validate_offsets
from ..memory.csvio import read_plan, read_problem, write_plan
from ..memory.planners import get_planner, plan_buffers
from ..models import get_model


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("file", nargs="?", metavar="FILE.csv",
                        help="buffer problem: id,lower,upper,size (lifetime [lower, upper))")
    parser.add_argument("--planner", default="ge",
                        help="planner name (none, refcount, ge-max, ge-binary, ge-hybrid, ge, "
                        "greedy-size, bestfit, anneal, ilp, ...); default ge")
    parser.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help="seconds for the search planners (ilp, anneal)")
    parser.add_argument("--alignment", type=int, default=None, metavar="N",
                        help="round sizes up to N bytes (default 1 for CSV, 512 for models)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (anneal)")
    parser.add_argument("-o", "--output", metavar="PLAN.csv",
                        help="write the plan as id,lower,upper,size,offset")
    parser.add_argument("--check", metavar="PLAN.csv",
                        help="validate a plan CSV instead of planning")
    parser.add_argument("--model", help="plan a zoo model's training graph (minigraph.models)")
    parser.add_argument("--batch", type=int, default=32, help="batch size for --model")
    parser.add_argument("--order", default="program",
                        help="schedule for --model (program, bfs, dfs, rdfs, ge, memory, best)")
    return parser


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


def _check(args: argparse.Namespace) -> int:
    buffers, offsets = read_plan(args.check)
    validate_offsets(buffers, offsets)
    print(f"{args.check}: valid plan")
    _report(len(buffers), theoretical_minimum(buffers), arena_size(buffers, offsets), None,
            no_reuse=sum(b.size for b in buffers))
    return 0


def _plan_csv(args: argparse.Namespace) -> int:
    buffers = read_problem(args.file)
    get_planner(args.planner)          # load the planners (and fail early) before timing
    t0 = time.perf_counter()
    aligned, placement = plan_buffers(buffers, args.planner, args.alignment or 1,
                                      **_planner_args(args))
    seconds = time.perf_counter() - t0
    print(f"{args.file}: planner {args.planner}, alignment {args.alignment or 1}")
    _report(len(buffers), theoretical_minimum(aligned), placement.arena_bytes,
            seconds, placement.note, no_reuse=sum(b.size for b in aligned))
    if args.output:
        write_plan(args.output, aligned, placement.offsets)
        print(f"plan written to {args.output}")
    return 0


def _plan_model(args: argparse.Namespace) -> int:
    graph = get_model(args.model, batch=args.batch).graph
    options = MemoryOptions(planner=args.planner, order=args.order,
                            alignment=args.alignment or 512, planner_args=_planner_args(args))
    report = plan_memory(graph, options)
    print(f"{args.model} (batch {args.batch}): {len(graph.nodes)} nodes, planner "
          f"{args.planner}, order {args.order}, alignment {options.alignment}")
    _report(len(report.plan.offsets), report.theoretical_minimum, report.arena_bytes,
            report.seconds, report.plan.note, no_reuse=report.no_reuse_bytes)
    if args.output:
        write_plan(args.output, report.plan.buffers(), report.plan.offsets)
        print(f"plan written to {args.output}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Do what the arguments ask; print the numbers; 0 on success, 1 on an error."""
    chosen = [x for x in (args.file, args.check, args.model) if x]
    if len(chosen) != 1:
        print("error: give exactly one of FILE.csv, --check PLAN.csv, --model NAME",
              file=sys.stderr)
        return 1
    try:
        if args.check:
            return _check(args)
        if args.model:
            return _plan_model(args)
        return _plan_csv(args)
    except (MinigraphError, OSError, KeyError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry point (`python -m minigraph.experiments.plan_cli ...`)."""
    parser = add_arguments(argparse.ArgumentParser(prog="minigraph plan",
                                                   description=__doc__.splitlines()[0]))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
