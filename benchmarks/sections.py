"""The sections of benchmarks/RESULTS.md: which script writes each, under which title.

`collect.py` reruns the CPU scripts of `SCRIPTS`; `gpu_collect.py` writes the sections of
`GPU_TITLES` from a lent GPU's run. Both read the titles here, so neither imports the other.
"""

from __future__ import annotations

# (title, command) of each CPU section, in the order RESULTS.md holds them.
SCRIPTS = [
    ("Engine speed: one SGD step against PyTorch eager (issue: foundation)",
     ["engine_speed.py"]),
    ("Plan quality: model x order x planner (issues: static planning 1 and 2)",
     ["plan_quality.py"]),
    ("Order and layout together (MODeL's ILP) against the best fixed order",
     ["plan_order_layout.py"]),
    ("Colouring and safe mode: bytes against parallel hazards", ["coloring.py"]),
    ("Planning time from 1,000 to 100,000 buffers", ["plan_scaling.py"]),
    ("DTR: overhead per heuristic and budget", ["dtr.py"]),
    ("DTR against the authors' simulator (simrd) on the same traces",
     ["dtr_reference.py", "--zoo"]),
    ("DTR: the default and the portfolio against the best of simrd's four heuristics",
     ["dtr_heuristics.py"]),
    ("Online allocators and fragmentation", ["allocators.py"]),
    ("PyTorch models imported with from_torch: planned bytes per technique",
     ["from_torch.py"]),
    ("Memory swap beside recomputation: device and host bytes, bytes moved, predicted time",
     ["swap.py"]),
    ("GPU script, dry run on NumPy (no GPU was lent to this run)", ["gpu.py", "--dry-run"]),
    ("Real models at real sizes from shapes alone, beside the GE blog", ["real_sizes.py"]),
]


GPU_TITLE = "GPU: minigraph on CuPy against PyTorch eager (benchmarks/gpu_run.sh)"
TORCH_TITLE = "GPU: PyTorch models imported with from_torch, PyTorch's CUDA peak " \
              "(benchmarks/gpu_run.sh)"
GPU_TITLES = (GPU_TITLE, TORCH_TITLE)
