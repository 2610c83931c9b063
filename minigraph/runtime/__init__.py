"""Running graphs: the arena executor (and the DTR runtime)."""

from .executor import Executor, RunStats, init_params  # noqa: F401
