"""Checks for lesson 10's exercises (your own PyTorch model): each takes the student's answer
and says right or not quite, with a hint that does not give the answer away. PyTorch is
imported only when a check runs (the lesson itself needs `pip install 'minigraph[torch]'`)."""

from __future__ import annotations

import math
from typing import Any

from ..errors import BudgetError, MinigraphError, ThrashError
from ..fromtorch import compare, from_torch
from ..fromtorch.zoo import torch_model
from ..memory import plan_memory
from ..runtime.dtr import simulate
from ..runtime.executor import Executor

#: Exercise 2's budgets, fractions of the total no-rematerialisation peak [Kirisame 2021].
RATIOS_2 = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2)
#: Exercise 2's model: the tiny GPT block of the PyTorch zoo.
GPT_2 = {"batch": 2, "seq": 16, "d_model": 32, "heads": 4}
TOLERANCE = 1e-4          # relative, on the loss: float32 summed in another order
MIN_PARAMS = 4            # exercise 1: at least two layers with weights and biases


def _import(module: Any, inputs: Any, loss_fn: Any, targets: Any) -> Any:
    return from_torch(module, inputs, loss_fn, targets=targets, name="yours")


def exercise_1(answer: Any) -> tuple[bool, str]:
    """Right when (module, example_inputs, loss_fn, targets) imports with every op mapped,
    has at least MIN_PARAMS parameter tensors, one step in minigraph gives PyTorch's loss
    within TOLERANCE, and its gradients are PyTorch's (`compare`: in float32, or in the
    float64 re-run where float32 rounding alone misses)."""
    try:
        module, inputs, loss_fn, targets = answer
    except (TypeError, ValueError):
        return False, ("ANSWER_1 must be (module, example_inputs, loss_fn, targets), not "
                       f"{type(answer).__name__}")
    import torch
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    targets = targets if isinstance(targets, tuple) else (targets,)
    try:
        model = _import(module, inputs, loss_fn, targets)
    except (MinigraphError, TypeError, ValueError, RuntimeError) as e:
        return False, f"the import refused it: {type(e).__name__}: {str(e)[:200]}"
    opaque = sorted({aten for _, aten, _ in model.report.opaque})
    if opaque:
        return False, (f"{len(opaque)} op(s) have no minigraph kernel ({', '.join(opaque[:4])}"
                       f"): build it from layers that map")
    if len(model.params) < MIN_PARAMS:
        return False, (f"{len(model.params)} parameter tensors: use at least {MIN_PARAMS} "
                       f"(two layers with weights and biases)")
    ours = float(Executor(model.graph, plan_memory(model.graph)).run(model.feeds(0))[model.loss])
    with torch.no_grad():
        theirs = float(loss_fn(module(*inputs), *targets))
    if not math.isclose(ours, theirs, rel_tol=TOLERANCE, abs_tol=1e-6):
        return False, (f"loss {ours:.6f} in minigraph, {theirs:.6f} in PyTorch: put the "
                       "module back as it was when you imported it (train mode, same weights)")
    check = compare(model, module, inputs, loss_fn, targets)
    done = (f"{len(model.graph)} nodes, every op mapped; loss {ours:.6f} in minigraph, "
            f"{theirs:.6f} in PyTorch")
    if check.ok():
        return True, f"{done}; gradients within {check.worst[1]:.0e} of PyTorch's"
    # float32 rounding on a deep net can exceed any float32 tolerance: float64 decides
    wide = compare(model, module, inputs, loss_fn, targets, float64=True)
    if wide.ok():
        return True, (f"{done}; in float32 the gradients differ by {check.worst[1]:.0e} "
                      f"(PyTorch's own float32 step is {check.rounding or 0:.0e} from its "
                      f"float64 one: rounding); in float64 they agree to {wide.worst[1]:.0e}")
    return False, (f"the gradient of {wide.worst[0]} differs from PyTorch's even in float64 "
                   f"({wide.worst[1]:.0e}): the import is wrong for this model; please report "
                   "it with the model")


def gpt_graph() -> Any:
    """Exercise 2's graph: the zoo's tiny GPT block (`GPT_2`), imported."""
    case = torch_model("gpt_block", **GPT_2)
    return _import(case.module, case.example_inputs, case.loss_fn, case.targets).graph


def _smallest_ratio(graph: Any) -> float | None:
    """The smallest of RATIOS_2 at which DTR's simulation finishes on `graph`."""
    done = None
    for r in RATIOS_2:
        try:
            simulate(graph, ratio=r, heuristic="dtr")
        except (BudgetError, ThrashError):
            continue
        done = r if done is None else min(done, r)
    return done


def exercise_2(ratio: Any) -> tuple[bool, str]:
    """Right when `ratio` is the smallest of RATIOS_2 at which DTR finishes on the imported
    tiny GPT block."""
    if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or ratio not in RATIOS_2:
        return False, f"ANSWER_2 must be one of RATIOS_2 {RATIOS_2}, not {ratio!r}"
    g = gpt_graph()
    best = _smallest_ratio(g)
    try:
        trace = simulate(g, ratio=float(ratio), heuristic="dtr")
    except BudgetError:
        return False, f"at {ratio} DTR cannot start: some op alone needs more than that"
    except ThrashError:
        return False, f"at {ratio} DTR thrashes: it recomputes too much to finish"
    if ratio == best:
        return True, (f"DTR finishes at {ratio} with compute x{trace.overhead:.3f}, and at "
                      f"no smaller budget of RATIOS_2")
    return False, (f"DTR finishes at {ratio} (compute x{trace.overhead:.3f}), but also at a "
                   "smaller budget: try lower")
