"""The long differential fuzz: random graphs x planners x orders x options, each plan
validated and its arena run compared bit for bit with the no-reuse run.

    python benchmarks/plan_fuzz.py --graphs 5000            # about 5,000 x 15 ms
    python benchmarks/plan_fuzz.py --graphs 5000 --start 500  # cases the suite does not run

The suite runs cases 0..499 (tests/test_plan_properties.py); this script runs any range of
the same cases (`graphgen.fuzz_case`), prints one line per failure and a summary, and exits
1 if any case failed. Not part of CI.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from graphgen import fuzz_case  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", type=int, default=5000, help="number of cases (graphs)")
    ap.add_argument("--start", type=int, default=0, help="first case index")
    ap.add_argument("--max-ops", type=int, default=12, help="ops per random graph, at most")
    args = ap.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)        # exp overflows are fine here
    t0 = time.perf_counter()
    planners: Counter = Counter()
    failed = 0
    for i in range(args.start, args.start + args.graphs):
        case, problem = fuzz_case(i, args.max_ops)
        planners[case.split(" planner=")[1].split()[0]] += 1
        if problem:
            failed += 1
            print(f"FAIL case {i}: {case}: {problem}", flush=True)
    seconds = time.perf_counter() - t0
    print(f"{args.graphs} graphs (cases {args.start}..{args.start + args.graphs - 1}), "
          f"{failed} failed, {seconds:.1f} s; per planner: "
          + ", ".join(f"{p} {n}" for p, n in sorted(planners.items())))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
