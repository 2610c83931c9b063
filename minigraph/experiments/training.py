"""Train a zoo model for a few SGD steps, with or without a memory plan: the experiment
that shows a plan changes where tensors live, never what the step computes.
"""

from __future__ import annotations

import numpy as np

from ..memory.api import MemoryOptions, MemoryReport, plan_memory
from ..memory.plan import MemoryPlan
from ..models import Model
from ..runtime.executor import Executor


def train(model: Model, steps: int = 30, lr: float | None = None, device: str = "cpu",
          plan: MemoryOptions | MemoryReport | MemoryPlan | None = None, seed: int = 0
          ) -> tuple[list[float], dict[str, np.ndarray]]:
    """`steps` SGD steps of `model` on its fixed batch `make_batch(seed)`.

    `plan`: None (no reuse), `MemoryOptions` (planned here), or a report or plan of this
    graph. Returns the loss of each step and the trained parameter values.
    """
    model = model.with_lr(lr) if lr is not None else model
    if isinstance(plan, MemoryOptions):
        plan = plan_memory(model.graph, plan)
    ex = Executor(model.graph, plan, device=device, seed=seed)
    values = model.init_params(seed)
    batch = model.make_batch(seed)
    losses = []
    for step in range(steps):
        out = ex.run({**batch, **values}, step=step)
        losses.append(float(out[model.loss]))
        values = {p: out[f"{p}_new"] for p in model.params}
    return losses, values
