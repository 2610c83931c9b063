"""minigraph: build a graph, derive its explicit backward graph, plan its memory, run it.

    import minigraph as mg
    x = mg.input("x", (64, 784)); W = mg.param("W", (784, 10))
    loss = mg.mean(mg.relu(x @ W))
    step = mg.training_graph(loss, [W], lr=0.1)
    report = mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="refcount"))

`__all__` below is the public API, grouped by layer; `dir(mg)` shows exactly it. Each layer
has more for those who read on (`minigraph.memory`, `minigraph.runtime.dtr`, `minigraph.ops`
for defining an op of your own, ...), imported from there.
"""

from .autodiff import grad, training_graph
from .backend import gpu_available
from .errors import (
    AllocationError,
    ArgumentError,
    BudgetError,
    CycleError,
    DeviceError,
    DTypeError,
    FeedError,
    GradError,
    GraphError,
    MinigraphError,
    PlanError,
    ShapeError,
    ThrashError,
    TimeLimitError,
    UnknownOpError,
)
from .feeds import init_params, random_feeds
from .fromtorch import from_torch  # PyTorch is imported only when it is called
from .graph import Graph, Node, Tensor, TensorInfo, constant, input, name_scope, param
from .memory import (
    Buffer,
    MemoryOptions,
    MemoryPlan,
    MemoryReport,
    liveness,
    plan_memory,
    schedule,
    theoretical_minimum,
)
from .memory.swap import Machine
from .memory.swap_plan import SwapReport, lowest_swap_plan, plan_swap
from .ops import (
    abs,
    add,
    add_n,
    avg_pool2d,
    batch_norm,
    bce_with_logits,
    broadcast_to,
    cast,
    clamp,
    compare,
    concat,
    conv2d,
    conv2d_grouped,
    div,
    div_round,
    dropout,
    embedding,
    exp,
    gelu,
    gelu_erf,
    group_norm,
    layer_norm,
    leaky_relu,
    log,
    log_softmax,
    logical,
    logical_not,
    matmul,
    max,
    max_pool2d,
    mean,
    mse,
    mul,
    neg,
    opaque,
    pow,
    relu,
    reshape,
    sigmoid,
    sign,
    silu,
    slice,
    smooth_l1,
    softmax,
    softmax_cross_entropy,
    sqrt,
    sub,
    sum,
    sum_to,
    tanh,
    transpose,
    tril,
    triu,
    where,
)
from .runtime import Executor
from .runtime.dtr import DTRExecutor, budget_bounds
from .viz.draw import draw, register_notebook_display
from .viz.widget import memory_widget

__version__ = "0.1.0"

__all__ = [
    # building a graph (core)
    "input", "param", "constant", "name_scope", "Tensor", "Graph", "Node", "TensorInfo",
    # the ops (each a function that adds a node; `x + y`, `x @ W`, `x[...]` call them too)
    "add", "add_n", "sub", "mul", "div", "div_round", "neg", "pow", "exp", "log", "sqrt",
    "abs", "sign", "clamp", "cast",
    "relu", "leaky_relu", "sigmoid", "tanh", "gelu", "gelu_erf", "silu",
    "matmul", "transpose", "reshape", "broadcast_to", "sum_to", "concat", "slice", "sum",
    "mean",
    "max",
    "compare", "logical", "logical_not", "where", "tril", "triu",
    "softmax", "log_softmax", "layer_norm", "batch_norm", "group_norm", "dropout",
    "embedding", "conv2d", "conv2d_grouped", "max_pool2d", "avg_pool2d",
    "softmax_cross_entropy", "mse", "bce_with_logits", "smooth_l1",
    "opaque",
    # the gradient pass, feeds
    "grad", "training_graph", "init_params", "random_feeds",
    # models from PyTorch
    "from_torch",
    # memory planning
    "plan_memory", "MemoryOptions", "MemoryReport", "MemoryPlan", "Buffer", "liveness",
    "schedule", "theoretical_minimum",
    # memory swap: offload to host memory and prefetch back [Rhu 2016]
    "plan_swap", "lowest_swap_plan", "SwapReport", "Machine",
    # running: the arena executor, DTR, the device
    "Executor", "DTRExecutor", "budget_bounds", "gpu_available",
    # drawing
    "draw", "memory_widget",
    # errors (every one a MinigraphError)
    "MinigraphError", "ArgumentError", "AllocationError", "BudgetError", "CycleError",
    "DeviceError", "DTypeError", "FeedError", "GradError", "GraphError", "PlanError",
    "ShapeError", "ThrashError", "TimeLimitError", "UnknownOpError",
]


def __dir__() -> list[str]:
    """The public API (`__all__`) and the version: what a notebook's completion offers.
    The layers stay reachable as attributes (`mg.memory.ORDERS`), but are not offered."""
    return sorted([*__all__, "__version__"])


register_notebook_display()   # a Graph shows as its drawing in a notebook
