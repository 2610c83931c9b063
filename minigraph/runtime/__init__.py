"""Running graphs: the arena executor (and the DTR runtime)."""

from .executor import Executor, init_params  # noqa: F401
from .measure import RunStats  # noqa: F401
