"""Pictures of graphs, plans and runs. Each module draws the records it is given (the
experiments layer computes them); graphviz, matplotlib and ipywidgets are imported by the
function that draws with them, so `import minigraph.viz` needs none of them:

- `minigraph.viz.draw`: graphviz drawing of a graph (forward / backward / update nodes);
- `minigraph.viz.plots`: matplotlib plots of liveness, plans, techniques and DTR sweeps;
- `minigraph.viz.layout_view`: the layout to explore (hover, zoom; plotly, with a static
  matplotlib picture where no script runs);
- `minigraph.viz.allocator_plots`: pictures of the online allocators and their fragmentation;
- `minigraph.viz.widget`: the notebook widget with a toggle for every technique;
  `minigraph.viz.explorer` is its logic without ipywidgets, `minigraph.viz.dtr_budget`
  its DTR runs and budget slider.
"""

from . import allocator_plots, draw, dtr_budget, explorer, layout_view, plots, widget  # noqa: F401
from .layout_view import (  # noqa: F401
    LayoutView,
    explore_layout,
    layout_blocks,
)
from .plots import (  # noqa: F401
    layout_rects,
    placement_rects,
    plot_comparison,
    plot_dtr_sweep,
    plot_layout,
    plot_placement,
    plot_timeline,
    timeline,
)
from .widget import MemoryExplorer, memory_widget  # noqa: F401
