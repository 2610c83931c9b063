"""A graphviz drawing of a graph, fed only by what the graph already carries.

Nodes are boxes coloured by role: forward (blue), backward (orange), update (green, a
hexagon, since it overwrites its parameter). Tensors are ellipses labelled with their
shape, dtype and bytes, outlined in their producer's colour; graph leaves have their own
shapes: inputs a trapezoid (yellow), parameters a cylinder (purple), constants a note
(grey). Graph outputs get a double outline, control dependencies a dashed grey edge.

In a notebook the drawing never ends in a traceback or a hang: if the `dot` program is
missing, it shows the DOT source as text and says how to install graphviz; if dot takes
longer than RENDER_TIMEOUT seconds (a few hundred nodes can), it shows the first
SMALLER_DRAWING nodes instead.
"""

from __future__ import annotations

import subprocess
from typing import Any

from ..errors import ArgumentTypeError, GraphError
from ..graph import Graph, fmt_bytes

# Role -> (shape, fill colour, outline colour) of op nodes.
NODE_STYLE = {
    "forward": ("box", "#cfe2ff", "#1f5fbf"),
    "backward": ("box", "#ffd8c2", "#c0501f"),
    "update": ("hexagon", "#d3f2d3", "#2e8b3e"),
}
# Tensor kind -> (shape, fill colour, outline colour).
TENSOR_STYLE = {
    "input": ("invtrapezium", "#fff3bf", "#a07a00"),
    "param": ("cylinder", "#e9d8fd", "#6b3fa0"),
    "const": ("note", "#eeeeee", "#666666"),
    "activation": ("ellipse", "#ffffff", "#1f5fbf"),
    "gradient": ("ellipse", "#ffffff", "#c0501f"),
    "updated": ("ellipse", "#ffffff", "#2e8b3e"),
}
LEGEND = (
    ("forward node", "node", "forward"), ("backward node", "node", "backward"),
    ("update node", "node", "update"), ("input", "tensor", "input"),
    ("parameter", "tensor", "param"), ("constant", "tensor", "const"),
    ("activation", "tensor", "activation"), ("gradient", "tensor", "gradient"),
    ("updated parameter", "tensor", "updated"),
)

FAST_LAYOUT_NODES = 60     # above this many drawn nodes, ask dot for a quicker layout
RENDER_TIMEOUT = 15.0      # seconds a notebook waits for dot before drawing fewer nodes
SMALLER_DRAWING = 80       # nodes drawn when the full drawing takes too long
MAX_WIDTH = 7.5            # inches (540 pt, 720 px): JupyterLab's output column, about

INSTALL_HINT = ("graphviz's `dot` program was not found, so the graph cannot be rendered; "
                "here is its DOT source. Install graphviz (apt-get install graphviz, "
                "conda install graphviz, or brew install graphviz) and draw it again.")


def _shape(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _node_label(node: Any, show_tensors: bool) -> str:
    """The op; its name too when tensors are hidden or the name says more (`W_new`)."""
    auto = node.name == node.op or node.name.startswith(node.op + "_")
    if show_tensors:
        return node.op if auto else f"{node.op}\\n{node.name}"
    return node.name if auto else f"{node.name}\\n{node.op}"


def _tensor_label(t: Any, plan: Any = None) -> str:
    label = f"{t.name}\\n{_shape(t.shape)} {t.dtype}\\n{fmt_bytes(t.nbytes)}"
    if t.alias_of:
        label += f"\\nover {t.alias_of}"
    if plan is not None and t.name in getattr(plan, "offsets", {}):
        label += f"\\n@ {plan.offsets[t.name]}"
    return label


def _style(kind: str, role_or_kind: str) -> dict[str, str]:
    shape, fill, line = (NODE_STYLE if kind == "node" else TENSOR_STYLE)[role_or_kind]
    return {"shape": shape, "style": "filled", "fillcolor": fill, "color": line}


def _short(value: object, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width] + "..."


def draw(graph: Graph, show_tensors: bool = True, max_nodes: int = 300,
         plan: Any = None, legend: bool = True, rankdir: str = "TB", *,
         width: float | None = MAX_WIDTH) -> Any:
    """A `graphviz.Digraph` of `graph` (it renders itself in a notebook).

    `show_tensors=False` draws op nodes only, tensors as edge labels. Only the first
    `max_nodes` nodes in program order are drawn (a note says how many were left out).
    `plan` (a MemoryPlan or MemoryReport) adds each planned tensor's arena offset.
    `width`: the widest the drawing may be, in inches; dot scales a wider one down, so a
    notebook (which shows an SVG at its own size, clipping the right edge) shows all of
    it, the legend on the right included. None leaves the natural size.
    """
    if not isinstance(graph, Graph) and isinstance(getattr(graph, "graph", None), Graph):
        graph = graph.graph                    # a zoo Model or an imported TorchModel
    if not isinstance(graph, Graph):
        raise ArgumentTypeError(f"draw: graph must be a Graph or a Model (with .graph), not "
                                f"{type(graph).__name__} {_short(graph)}")
    if plan is not None and hasattr(plan, "plan"):
        plan = plan.plan
    dot = _new_digraph(graph.name)
    dot.attr(rankdir=rankdir, fontname="Helvetica", fontsize="11")
    if width is not None:
        if not width > 0:
            raise GraphError(f"draw: width must be a positive number of inches, not {width!r}")
        dot.attr(size=f"{width:g},1000")       # scale down to fit; never up
    if min(len(graph.nodes), max_nodes) > FAST_LAYOUT_NODES:
        # dot's crossing minimisation and spline routing grow much faster than linearly;
        # these limits keep a few hundred nodes to seconds (straight edges, more crossings)
        dot.attr(mclimit="0.1", nslimit="1", nslimit1="1", splines="line")
    if len(graph.nodes) > SMALLER_DRAWING and max_nodes > SMALLER_DRAWING:
        dot.smaller = lambda: draw(graph, show_tensors, SMALLER_DRAWING, plan, legend, rankdir,
                                   width=width)
    dot.attr("node", fontname="Helvetica", fontsize="10")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")

    nodes = list(graph.nodes[:max_nodes])
    node_id = {n.name: f"n{k}" for k, n in enumerate(nodes)}
    wanted: list[str] = []           # tensors to draw, in first-seen order
    seen: set[str] = set()
    for n in nodes:
        for t in (*n.inputs, *n.outputs):
            if t not in seen:
                seen.add(t)
                wanted.append(t)
    for t in graph.outputs:
        if t not in seen and graph.tensors[t].producer is None:
            seen.add(t)
            wanted.append(t)
    tensor_id = {t: f"t{k}" for k, t in enumerate(wanted)}
    outputs = set(graph.outputs)

    for n in nodes:
        dot.node(node_id[n.name], _node_label(n, show_tensors), **_style("node", n.role),
                 tooltip=f"{n.role} node {n.name}: {n.op}({', '.join(n.inputs)})")
    for name in wanted:
        t = graph.tensors[name]
        if not show_tensors and not t.is_leaf:
            continue
        style = _style("tensor", t.kind)
        if name in outputs:
            style["peripheries"] = "2"
        dot.node(tensor_id[name], _tensor_label(t, plan), **style,
                 tooltip=f"{t.kind} {t.spec()} {t.dtype}, {t.nbytes} bytes")

    def src(name: str) -> str | None:
        """Where an edge carrying tensor `name` starts."""
        t = graph.tensors[name]
        if show_tensors or t.is_leaf:
            return tensor_id[name]
        return node_id.get(t.producer)

    for n in nodes:
        for k, i in enumerate(n.inputs):
            start = src(i)
            if start is None:
                continue
            t = graph.tensors[i]
            label = "" if show_tensors or t.is_leaf else f"{i}\\n{_shape(t.shape)}"
            if len(n.inputs) > 1 and show_tensors:
                label = str(k)
            dot.edge(start, node_id[n.name], label=label)
        if show_tensors:
            for o in n.outputs:
                dot.edge(node_id[n.name], tensor_id[o])
        for d in n.deps:
            if d in node_id:
                dot.edge(node_id[d], node_id[n.name], style="dashed", color="#999999",
                         arrowhead="empty", tooltip=f"{n.name} runs after {d}")
    if not show_tensors:   # outputs that are not consumed still deserve a mark
        for o in graph.outputs:
            p = graph.tensors[o].producer
            if p in node_id:
                oid = f"out_{tensor_id[o]}"
                dot.node(oid, f"{o}\\n{_shape(graph.tensors[o].shape)}", shape="plaintext")
                dot.edge(node_id[p], oid)

    if len(graph.nodes) > len(nodes):
        dot.node("more", f"... {len(graph.nodes) - len(nodes)} more nodes not drawn\\n"
                 f"(draw(graph, max_nodes={len(graph.nodes)}) draws them all)",
                 shape="plaintext", fontcolor="#aa0000")
    if legend:
        roles = {n.role for n in nodes}
        kinds = {graph.tensors[t].kind for t in wanted
                 if show_tensors or graph.tensors[t].is_leaf}
        _legend(dot, roles, kinds)
    return dot


def _legend(dot: Any, roles: set[str], kinds: set[str]) -> None:
    """A small cluster with one sample of every style the drawing uses."""
    with dot.subgraph(name="cluster_legend") as leg:
        leg.attr(label="legend", fontsize="10", style="rounded", color="#bbbbbb")
        prev = None
        for k, (text, kind, key) in enumerate(LEGEND):
            if key not in (roles if kind == "node" else kinds):
                continue
            lid = f"legend{k}"
            leg.node(lid, text, **_style(kind, key), fontsize="9")
            if prev is not None:
                leg.edge(prev, lid, style="invis")
            prev = lid


# --- rendering that never ends in a traceback ---------------------------------------------

try:
    import graphviz
except ImportError:        # a dependency, but a missing one must not break `import`
    graphviz = None

if graphviz is not None:
    class Drawing(graphviz.Digraph):
        """A Digraph whose notebook display never ends in a traceback or a hang: SVG from
        `dot` within RENDER_TIMEOUT seconds; if dot is slower, the first SMALLER_DRAWING
        nodes instead; without dot, the DOT source and how to install graphviz."""

        smaller: Any = None      # set by draw(): a function giving a smaller drawing

        def _repr_mimebundle_(self, include=None, exclude=None, **kw):
            wanted = set(include) if include is not None else {"image/svg+xml"}
            wanted -= set(exclude or ())
            if wanted - {"image/svg+xml"}:            # png, jpeg: graphviz's own path
                try:
                    return super()._repr_mimebundle_(include=include, exclude=exclude, **kw)
                except graphviz.ExecutableNotFound:
                    return fallback_bundle(self.source)
                except Exception as e:
                    return fallback_bundle(self.source, _failed(e))
            if not wanted:
                return {}
            try:
                return {"image/svg+xml": render_svg(self.source, self.engine)}
            except graphviz.ExecutableNotFound:
                return fallback_bundle(self.source)
            except subprocess.TimeoutExpired:
                if self.smaller is not None:
                    return self.smaller()._repr_mimebundle_(include=include, exclude=exclude)
                return {"text/plain": f"dot needed more than {RENDER_TIMEOUT:.0f} s to lay out "
                                      f"this graph; draw part of it with "
                                      f"mg.draw(graph, max_nodes={SMALLER_DRAWING}) or "
                                      f"show_tensors=False"}
            except Exception as e:   # dot crashed (huge graph, bad label): still no traceback
                return fallback_bundle(self.source, _failed(e))


def _failed(e: Exception) -> str:
    return f"graphviz could not render the graph ({type(e).__name__}: {e}); DOT source:"


def render_svg(source: str, engine: str = "dot", timeout: float | None = None) -> str:
    """SVG text from `dot -Tsvg`, stopped after `timeout` seconds (RENDER_TIMEOUT)."""
    try:
        r = subprocess.run([engine, "-Tsvg"], input=source.encode("utf-8"),
                           capture_output=True, check=False,
                           timeout=RENDER_TIMEOUT if timeout is None else timeout)
    except FileNotFoundError:
        raise graphviz.ExecutableNotFound([engine]) from None
    if r.returncode:
        raise RuntimeError(f"{engine} exited with {r.returncode}: "
                           f"{r.stderr.decode(errors='replace').strip()[:300]}")
    return r.stdout.decode("utf-8")


def _new_digraph(name: str) -> Any:
    return DotSource(name) if graphviz is None else Drawing(name=name)


def fallback_bundle(source: str, message: str = INSTALL_HINT) -> dict[str, str]:
    """What a notebook shows when the graph cannot be rendered: a message and DOT text."""
    return {"text/plain": f"{message}\n\n{source}"}


class DotSource:
    """Stand-in for graphviz.Digraph when the graphviz Python package is not installed:
    collects the same DOT statements and shows them as text."""

    def __init__(self, name: str = "graph", _body: list[str] | None = None,
                 _sub: bool = False):
        self.name, self.body, self._sub = name, [] if _body is None else _body, _sub

    @staticmethod
    def _attrs(kw: dict) -> str:
        items = ", ".join(f'{k}="{v}"' for k, v in kw.items() if v != "")
        return f" [{items}]" if items else ""

    def attr(self, kind: str | None = None, **kw: Any) -> None:
        if kind is None:
            self.body.append("  " + "; ".join(f'{k}="{v}"' for k, v in kw.items()))
        else:
            self.body.append(f"  {kind}{self._attrs(kw)}")

    def node(self, name: str, label: str | None = None, **kw: Any) -> None:
        self.body.append(f'  "{name}"{self._attrs({"label": label, **kw} if label else kw)}')

    def edge(self, a: str, b: str, label: str | None = None, **kw: Any) -> None:
        self.body.append(f'  "{a}" -> "{b}"{self._attrs({"label": label or "", **kw})}')

    def subgraph(self, name: str) -> DotSource:
        sub = DotSource(name, [], True)
        self.body.append(sub)   # type: ignore[arg-type]
        return sub

    def __enter__(self) -> DotSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    @property
    def source(self) -> str:
        lines = [f'{"subgraph" if self._sub else "digraph"} "{self.name}" {{']
        for b in self.body:
            lines.append(b.source if isinstance(b, DotSource) else b)
        return "\n".join(lines + ["}"])

    def _repr_mimebundle_(self, include=None, exclude=None, **kw: Any) -> dict[str, str]:
        return fallback_bundle(self.source, "the graphviz Python package is not installed "
                                            "(pip install graphviz; and apt-get install "
                                            "graphviz or conda install graphviz for `dot`); "
                                            "DOT source:")


def register_notebook_display() -> None:
    """Show a `Graph` as its drawing in IPython. The graph (core) knows nothing of drawing;
    the face of the package (`minigraph/__init__.py`) calls this once on import."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None:
        ip.display_formatter.mimebundle_formatter.for_type(
            Graph, lambda g: draw(g)._repr_mimebundle_())
