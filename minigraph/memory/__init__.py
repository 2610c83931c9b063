"""Static memory planning: schedule -> liveness -> in-place -> sharing -> plan -> validate."""

# Every order and planner module registers itself on import: fill the registries now, so
# ORDERS and PLANNERS list every technique as soon as `minigraph.memory` is imported.
from . import topo  # noqa: E402,F401
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
from .inplace import inplace_pairs, merge_inplace  # noqa: F401
from .liveness import Interval, Liveness, liveness  # noqa: F401
from .orders import ORDERS, schedule  # noqa: F401
from .plan import MemoryPlan  # noqa: F401
from .planners import PLANNERS, get_planner, plan_buffers  # noqa: F401
from .planners import _load_all as _load_planners  # noqa: E402

_load_planners()
