"""Run every benchmark script and write their output to benchmarks/RESULTS.md.

    python benchmarks/collect.py            # full runs (tens of minutes on 2 cores)
    python benchmarks/collect.py --quick    # the scripts' --quick variants

Each section names the exact command and the date; nothing in RESULTS.md is typed by hand.
A script that exits with status 2 lacks an outside reference (dtr_reference.py needs the
DTR authors' simulator, `SIMRD_PATH`); its previous section is kept.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # minigraph from this checkout

from sections import GPU_TITLES, SCRIPTS  # noqa: E402

from minigraph.files import write_text  # noqa: E402

HERE = Path(__file__).parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated script names to rerun")
    args = ap.parse_args()
    out = HERE / "RESULTS.md"
    old = out.read_text() if out.exists() else ""
    # A section runs from its "## <title>" line to the next script's: the scripts print
    # "##" headers of their own, which stay inside their section.
    # The GPU sections come from a lent GPU (gpu_run.sh, gpu_collect.py): kept as they are.
    titles = {f"## {t}" for t, _ in SCRIPTS} | {f"## {t}" for t in GPU_TITLES}
    sections: dict[str, str] = {}
    current: str | None = None
    for line in old.splitlines():
        if line in titles:
            current = line[3:]
            sections[current] = line
        elif current is not None:
            sections[current] += "\n" + line
    sections = {t: body.rstrip() for t, body in sections.items()}
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    for title, cmd in SCRIPTS:
        if only and cmd[0] not in only:
            continue
        if args.quick and cmd[0] not in ("gpu.py", "dtr_reference.py"):
            cmd = cmd + ["--quick"]
        print(f"running {' '.join(cmd)} ...", flush=True)
        res = subprocess.run([sys.executable, str(HERE / cmd[0]), *cmd[1:]], capture_output=True,
                             text=True, cwd=HERE.parent)
        if res.returncode == 2 and title in sections:
            print(f"  {cmd[0]}: reference missing, section kept", flush=True)
            continue
        body = res.stdout.strip() or res.stderr.strip()[-3000:]
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        sections[title] = (f"## {title}\n\n`python benchmarks/{' '.join(cmd)}` "
                           f"(exit {res.returncode}, {when}, {platform.node() or 'this machine'}, "
                           f"{platform.machine()}, Python {platform.python_version()})\n\n{body}")
    order = [t for t, _ in SCRIPTS] + list(GPU_TITLES)
    text = "# Benchmark results\n\nWritten by `python benchmarks/collect.py`; each section " \
           "says the command that printed it.\n\n" + \
           "\n\n".join(sections[t] for t in order if t in sections) + "\n"
    write_text(out, text)     # whole or not at all (minigraph/files.py)
    return 0


if __name__ == "__main__":
    sys.exit(main())
