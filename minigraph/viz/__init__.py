"""Pictures of graphs, plans and runs. Submodules load on first use (graphviz, matplotlib
and ipywidgets are only needed by the one that draws with them):

- `minigraph.viz.draw`: graphviz drawing of a graph (forward / backward / update nodes);
- `minigraph.viz.plots`: matplotlib plots of liveness, plans and memory saved;
- `minigraph.viz.widget`: the notebook widget with a toggle for every technique.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = ("draw", "plots", "widget")


def __getattr__(name: str) -> Any:
    """`viz.draw`, `viz.plots`, `viz.widget` import their module; any other name is looked
    up in plots, then widget (so `viz.some_plot(...)` works without importing matplotlib
    at `import minigraph`)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name.startswith("_"):
        raise AttributeError(name)
    for sub in ("plots", "widget"):
        try:
            mod = importlib.import_module(f"{__name__}.{sub}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{sub}":
                raise
            continue
        if hasattr(mod, name):
            return getattr(mod, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SUBMODULES))
