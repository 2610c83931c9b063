"""Checks for lesson 10b's exercise (real sizes from shapes alone): DTR on a device smaller
than the step's peak, at ResNet-50's real size [He 2016] [Kirisame 2021]. The check takes the
student's answer and says right or not quite, with a hint that does not give the answer
away. PyTorch is imported only when a check runs (the lesson needs it)."""

from __future__ import annotations

from functools import cache
from typing import Any

from ..errors import BudgetError, ThrashError
from ..experiments.estimate import DTR_OPTIONS, GB
from ..fromtorch import from_torch
from ..fromtorch.real_sizes import real_model
from ..runtime.dtr import budget_bounds, simulate

#: Exercise 1's devices, in decimal GB (the whole device: weights, inputs and outputs too).
DEVICES_1 = (0.75, 1.0, 1.5, 2.0, 2.5)
#: Exercise 1's price: DTR may recompute, but the step may cost at most this much compute.
MAX_OVERHEAD_1 = 1.1
#: Exercise 1's model: ResNet-50's training step at its real batch (224x224 images).
RESNET_1 = {"batch": 32}


@cache
def resnet50_training() -> Any:
    """Exercise 1's graph: ResNet-50's training step at `RESNET_1`, imported from shapes."""
    case = real_model("resnet50", **RESNET_1)
    return from_torch(case.module, case.example_inputs, case.loss_fn,
                      targets=case.targets, name="resnet50").graph


@cache
def _overhead(device_gb: float) -> float | None:
    """DTR's compute on a device of `device_gb` (None: it cannot finish there), with the
    options of `estimate`'s table (sampled h_DTR, stopped past 3x the compute)."""
    g = resnet50_training()
    b = budget_bounds(g)
    budget = int(device_gb * GB) - b.external
    if budget >= b.peak:
        return 1.0
    if budget < b.lower:
        return None
    try:
        return simulate(g, budget=budget, options=DTR_OPTIONS).overhead
    except (BudgetError, ThrashError):
        return None


def exercise_1(device: Any) -> tuple[bool, str]:
    """Right when `device` is the smallest of DEVICES_1 on which DTR finishes ResNet-50's
    training step with compute at most MAX_OVERHEAD_1."""
    if not isinstance(device, (int, float)) or isinstance(device, bool) or \
            device not in DEVICES_1:
        return False, f"ANSWER_1 must be one of DEVICES_1 {DEVICES_1}, not {device!r}"
    cost = {d: _overhead(d) for d in DEVICES_1}
    fine = [d for d in DEVICES_1 if cost[d] is not None and cost[d] <= MAX_OVERHEAD_1]
    mine = cost[device]
    if mine is None:
        return False, f"on {device} GB DTR does not finish: try a larger device"
    if mine > MAX_OVERHEAD_1:
        return False, (f"on {device} GB DTR finishes but pays compute x{mine:.2f}, more "
                       f"than x{MAX_OVERHEAD_1}: try a larger device")
    if device == min(fine):
        return True, (f"on {device} GB DTR pays compute x{mine:.2f}; on every smaller device "
                      f"of DEVICES_1 it pays more than x{MAX_OVERHEAD_1} or cannot finish")
    return False, (f"on {device} GB DTR pays compute x{mine:.2f}, and a smaller device of "
                   "DEVICES_1 is also within the price: try smaller")
