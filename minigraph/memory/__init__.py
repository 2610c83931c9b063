"""Static memory planning: schedule -> liveness -> in-place -> colours -> planner -> validate.

`plan_memory(graph, MemoryOptions(planner=...))` runs every step; `plan_buffers` plans a
list of `Buffer`s with a named planner of `PLANNERS`.
"""

from . import topo  # noqa: F401  (registers the orders beyond "program" in ORDERS)
from .api import MemoryOptions, MemoryReport, plan_memory, planning_buffers  # noqa: F401
from .buffers import (  # noqa: F401
    Buffer,
    Placement,
    align_up,
    live_bytes_per_step,
    theoretical_minimum,
    validate_offsets,
)
from .coloring import color_nodes, tensor_colors  # noqa: F401
from .footprint import Footprint, step_workspace, working_minimum  # noqa: F401
from .inplace import inplace_pairs, merge_inplace  # noqa: F401
from .liveness import Interval, Liveness, liveness  # noqa: F401
from .orders import ORDERS, schedule  # noqa: F401
from .plan import MemoryPlan  # noqa: F401
from .planners import PLANNERS, get_planner, plan_buffers, planner_options  # noqa: F401
