"""minigraph: build a graph, derive its explicit backward graph, plan its memory, run it.

    import minigraph as mg
    x = mg.input("x", (64, 784)); W = mg.param("W", (784, 10))
    loss = mg.mean(mg.relu(x @ W))
    step = mg.training_graph(loss, [W], lr=0.1)
    report = mg.plan_memory(step, mg.MemoryOptions(inplace=True, planner="refcount"))
"""

from .autodiff import grad, training_graph  # noqa: F401
from .backend import gpu_available  # noqa: F401
from .errors import (  # noqa: F401
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
from .feeds import init_params, random_feeds  # noqa: F401
from .fromtorch import from_torch  # noqa: F401  (PyTorch is imported only when it is called)
from .graph import Graph, Node, Tensor, TensorInfo, constant, input, name_scope, param  # noqa: F401
from .memory import (  # noqa: F401
    Buffer,
    MemoryOptions,
    MemoryPlan,
    MemoryReport,
    liveness,
    plan_memory,
    schedule,
    theoretical_minimum,
)
from .ops import *  # noqa: F401,F403
from .ops import (  # noqa: F401
    add,
    add_n,
    broadcast_to,
    div,
    exp,
    gelu,
    log,
    matmul,
    mean,
    mul,
    neg,
    pow,
    relu,
    reshape,
    sigmoid,
    sqrt,
    sub,
    sum,
    tanh,
    transpose,
)
from .runtime import Executor  # noqa: F401
from .runtime.dtr import DTRExecutor, budget_bounds  # noqa: F401
from .viz.draw import draw, register_notebook_display  # noqa: F401
from .viz.widget import memory_widget  # noqa: F401

__version__ = "0.1.0"

register_notebook_display()   # a Graph shows as its drawing in a notebook
