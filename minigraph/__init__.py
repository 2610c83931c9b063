"""minigraph: build a graph, derive its explicit backward graph, plan its memory, run it.

    import minigraph as mg
    x = mg.input("x", (64, 784)); W = mg.param("W", (784, 10))
    loss = mg.mean(mg.relu(x @ W))
    step = mg.training_graph(loss, [W], lr=0.1)
    report = mg.plan_memory(step, mg.MemoryOptions(inplace=True, sharing="refcount"))
"""

from .autodiff import grad, training_graph  # noqa: F401
from .backend import gpu_available  # noqa: F401
from .errors import (  # noqa: F401
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
    UnknownOpError,
)
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
from .runtime import Executor, init_params  # noqa: F401
from .runtime.dtr import DTRExecutor, budget_bounds  # noqa: F401,E402

__version__ = "0.1.0"


def draw(graph, **kw):
    """A graphviz drawing of the graph (see minigraph.viz.draw)."""
    from .viz.draw import draw as _draw
    return _draw(graph, **kw)


def memory_widget(graph_or_model=None, **kw):
    """The memory-saved widget (ipywidgets; see minigraph.viz.widget)."""
    from .viz.widget import memory_widget as _mw
    return _mw(graph_or_model, **kw)
