"""Put what `benchmarks/gpu_run.sh` printed on a lent GPU into benchmarks/RESULTS.md.

    python benchmarks/gpu_collect.py FOLDER     # FOLDER: the run's $OUT, copied back

Writes the GPU sections of RESULTS.md (the device, its versions, the GPU tests' summary,
benchmarks/gpu.py's tables and benchmarks/from_torch.py's output, each as printed there)
and copies the rows to minigraph/experiments/gpu_results.json, which lesson 08 shows
where no GPU is present. `collect.py`, which reruns the CPU benchmarks, keeps these
sections as they are.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # minigraph from this checkout

from sections import GPU_TITLE, GPU_TITLES, SCRIPTS, TORCH_TITLE  # noqa: E402

from minigraph.files import write_bytes, write_text  # noqa: E402

HERE = Path(__file__).parent
RESULTS = HERE / "RESULTS.md"
JSON = HERE.parent / "minigraph" / "experiments" / "gpu_results.json"
TITLES = GPU_TITLES


def summary_line(text: str) -> str:
    """pytest's last line ("137 passed in 17.6s")."""
    lines = [ln.strip("= ") for ln in text.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    return lines[-1] if lines else "no summary"


def sections(folder: Path) -> dict[str, str]:
    env = (folder / "env.txt").read_text()
    results = json.loads((folder / "gpu_results.json").read_text())
    e = results["environment"]
    head = (f"Run by `benchmarks/gpu_run.sh` on a lent {e['device']}; CuPy {e['cupy']}, CUDA "
            f"runtime {e['cuda_runtime']} (driver {e['cuda_driver']}), PyTorch {e['torch']}, "
            f"NumPy {e['numpy']}, Python {e['python']}.")
    tests = (f"- `MINIGRAPH_DEVICE=gpu pytest tests/test_gpu.py` (and the GPU test of "
             f"test_online.py): {summary_line((folder / 'gpu_tests.txt').read_text())}\n"
             f"- the suite's executor tests with `MINIGRAPH_DEVICE=gpu`: "
             f"{summary_line((folder / 'suite_gpu.txt').read_text())}\n"
             f"- uploading a batch inside a step: "
             f"{next((ln for ln in env.splitlines() if 'new batch' in ln), 'not probed')}")
    gpu = (folder / "gpu.md").read_text().strip()
    log = (folder / "gpu.log").read_text()
    phases = "\n".join(f"- {ln}" for ln in log.splitlines() if re.match(r"\[\d+ s\]", ln))
    torch = (folder / "from_torch.md").read_text().strip()
    return {GPU_TITLE: f"## {GPU_TITLE}\n\n{head}\n\n{tests}\n\nSeconds of each phase "
                       f"(the machine's start not counted):\n\n{phases}\n\n"
                       f"`python benchmarks/gpu.py --profile`:\n\n{gpu}",
            TORCH_TITLE: f"## {TORCH_TITLE}\n\n{head}\n\n`python benchmarks/from_torch.py`:"
                         f"\n\n{torch}"}


def write(folder: Path) -> None:
    new = sections(folder)
    text = RESULTS.read_text()
    for title in TITLES:                        # drop the old GPU sections
        text = drop_section(text, title)
    write_text(RESULTS, text.rstrip() + "\n\n" + "\n\n".join(new[t] for t in TITLES) + "\n")
    write_bytes(JSON, (folder / "gpu_results.json").read_bytes())


def drop_section(text: str, title: str) -> str:
    """Everything but the section `## title` (up to the next section this file knows)."""
    lines, out, skipping = text.splitlines(), [], False
    known = tuple(f"## {t}" for t in TITLES)
    for line in lines:
        if line == f"## {title}":
            skipping = True
            continue
        if skipping and line.startswith("## ") and (line in known or _is_script_title(line)):
            skipping = False
        if not skipping:
            out.append(line)
    return "\n".join(out)


def _is_script_title(line: str) -> bool:
    return line[3:] in {t for t, _ in SCRIPTS}


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: python benchmarks/gpu_collect.py FOLDER (gpu_run.sh's $OUT)")
        sys.exit(2)
    write(Path(sys.argv[1]))
