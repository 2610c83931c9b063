#!/usr/bin/env bash
# The GPU checks, as ONE run on a lent GPU machine (its time is short: every start and idle
# minute counts). Nothing is installed from the network: the machine's python3 already has
# CuPy, PyTorch, NumPy, SciPy, pytest, tqdm and sortedcontainers; minigraph runs from this
# checkout (PYTHONPATH). Everything it prints lands in $OUT (eight files at most):
#
#   env.txt          the device, driver, CUDA, CuPy and PyTorch versions, and a probe
#   gpu_tests.txt    MINIGRAPH_DEVICE=gpu pytest of every GPU test (none may skip)
#   suite_gpu.txt    the suite's executor tests with MINIGRAPH_DEVICE=gpu
#   lesson08.txt     lesson 08 run as a script on the GPU (its live numbers)
#   from_torch.md    benchmarks/from_torch.py: planned bytes beside PyTorch's CUDA peak
#   gpu.md           benchmarks/gpu.py: the tables for RESULTS.md (minigraph against the replay
#                    of its graph in PyTorch and against PyTorch as a user writes it), then
#                    benchmarks/swap_gpu.py, then the tables again with torch.compile's rows
#   gpu_results.json the same rows, for minigraph/experiments/gpu_results.json
#   gpu.log          the benchmark's progress, and the seconds of each phase
#
# Correctness and memory checks run side by side (each in its own process, its own CuPy
# pool); the timed benchmark runs alone after them.
#
#     OUT=/tmp/out bash benchmarks/gpu_run.sh
#     DRY_RUN=1 OUT=/tmp/out bash benchmarks/gpu_run.sh   # here, no GPU: the same phases on
#                    NumPy at tiny sizes (the GPU tests skip), to check the script before a lease
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minigraph-gpu}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
# (A dry run compiles only the MLP: inductor on two loaded CPU cores takes minutes a model.)
if [ "${DRY_RUN:-0}" = 1 ]; then DEV=cpu; DRY=--dry-run; COMPILED=mlp
else DEV=gpu; DRY=; COMPILED=mlp,resnet,transformer; fi
# A hung GPU test fails alone where pytest-timeout is there (the GPU machine has it).
TIMEOUT=; $PY -c "import pytest_timeout" 2>/dev/null && TIMEOUT="--timeout 150"
start=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start )) s] $*" >> "$OUT/gpu.log"; }

if [ -n "$DRY" ]; then
  echo "dry run: no GPU, NumPy" > "$OUT/env.txt"
else {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  $PY - <<'EOF'
import platform, numpy, cupy, torch
from minigraph.experiments.gpu import environment
print("python", platform.python_version(), "numpy", numpy.__version__,
      "torch", torch.__version__, "torch cuda", torch.version.cuda)
print(environment("gpu"))
try:
    from cupy._core import _accelerator as acc
    print("cupy accelerators: routines", acc.get_routine_accelerators(), "reductions",
          acc.get_reduction_accelerators())
except Exception as e:
    print("cupy accelerators: unknown", e)
# Does uploading a new batch inside a step synchronise? (the tests guard steps without one)
import cupyx, minigraph as mg
from minigraph.models import get_model
m = get_model("mlp")
ex = mg.Executor(m.graph, mg.plan_memory(m.graph, mg.MemoryOptions(planner="refcount")), device="gpu")
ex.load(m.feeds(0))
ex.step(step=0)
try:
    with cupyx.allow_synchronize(False):
        ex.step(m.make_batch(1), step=1)
    print("a step with a new batch (host -> device) made no synchronising call")
except Exception as e:
    print("a step with a new batch synchronised:", type(e).__name__, e)
EOF
} > "$OUT/env.txt" 2>&1
fi
stamp "environment"

# Phase A: correctness and memory, in parallel.
MINIGRAPH_DEVICE=$DEV timeout 200 $PY -m pytest -q -rs -p no:cacheprovider \
  $TIMEOUT tests/test_gpu.py tests/test_swap_gpu.py tests/test_gpu_imported.py \
  tests/test_torch_idiomatic.py \
  "tests/test_online.py::test_cupy_pool_measurement_sits_beside_its_simulation" \
  > "$OUT/gpu_tests.txt" 2>&1 &
MINIGRAPH_DEVICE=$DEV timeout 200 $PY -m pytest -q -rs -p no:cacheprovider -n 4 \
  tests/test_arena.py tests/test_executor_resident.py tests/test_dtr_runtime.py \
  tests/test_plan_properties.py tests/test_inplace.py tests/test_errors.py tests/test_ops.py \
  tests/test_plan_binding.py tests/test_models.py tests/test_gradcheck.py \
  > "$OUT/suite_gpu.txt" 2>&1 &
(cd lessons/src && MINIGRAPH_DEVICE=$DEV timeout 200 $PY 08_gpu_cupy.py) > "$OUT/lesson08.txt" 2>&1 &
timeout 200 $PY benchmarks/from_torch.py > "$OUT/from_torch.md" 2>&1 &
wait
stamp "phase A (tests, lesson 08, from_torch)"

# Phase B: the timed benchmark, alone on the GPU.
timeout 240 $PY benchmarks/gpu.py $DRY --profile --json "$OUT/gpu_results.json" > "$OUT/gpu.md" 2>> "$OUT/gpu.log"
stamp "phase B (benchmarks/gpu.py) exit $?"
# Swap on a real copy stream (the swap issue): the link measured, a swap plan's step and peak
# against PyTorch's save_on_cpu; appended to gpu.md (eight files at most come back).
timeout 120 $PY benchmarks/swap_gpu.py $DRY >> "$OUT/gpu.md" 2>> "$OUT/gpu.log"
stamp "phase C (benchmarks/swap_gpu.py) exit $?"
# torch.compile's rows last (compiling takes minutes): each model's saved into the JSON as it
# is measured, the tables printed again with them; a time limit keeps what was measured.
timeout 150 $PY benchmarks/gpu.py $DRY --models $COMPILED --add-compile "$OUT/gpu_results.json" >> "$OUT/gpu.md" 2>> "$OUT/gpu.log"
stamp "phase D (torch.compile rows) exit $?"
tail -n 3 "$OUT"/gpu_tests.txt "$OUT"/suite_gpu.txt "$OUT"/lesson08.txt
cat "$OUT/gpu.log"
