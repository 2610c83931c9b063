"""The drawing: distinct styles per node role and tensor kind, labels from the graph, and a
notebook display that falls back to DOT text (never a traceback) without `dot`."""

from __future__ import annotations

import re

import graphviz
import pytest

import minigraph as mg
from minigraph.graph import Graph
from minigraph.viz import draw as draw_module


def step_graph() -> Graph:
    with mg.name_scope():
        x = mg.input("x", (8, 5))
        W = mg.param("W", (5, 3))
        h = x @ W
        loss = mg.mean(mg.tanh(h) + mg.sigmoid(h))
        return mg.training_graph(loss, [W], lr=0.1)


def _line(source: str, label: str) -> str:
    """The DOT statement of the node with exactly this label (as the DOT source quotes it)."""
    for ln in source.splitlines():
        if f"label={label} " in ln or f'label="{label}"' in ln:
            return ln
    raise AssertionError(f"no statement labelled {label!r}")


def test_draw_returns_a_digraph_with_a_node_per_op_and_tensor() -> None:
    g = step_graph()
    d = mg.draw(g)
    assert isinstance(d, graphviz.Digraph)
    src = d.source
    for k in range(len(g)):
        assert f"\tn{k} [" in src
    for k in range(len(g.tensors)):
        assert f"\tt{k} [" in src


def test_roles_are_visibly_different() -> None:
    g = step_graph()
    src = mg.draw(g).source
    fills = {}
    for role, label in (("forward", "tanh"), ("backward", "tanh_grad"),
                        ("update", "sgd_update\\nW_new")):
        line = _line(src, label)
        fills[role] = re.search(r'fillcolor="([^"]+)"', line).group(1)
        assert fills[role] == draw_module.NODE_STYLE[role][1]
    assert len(set(fills.values())) == 3
    assert "shape=hexagon" in _line(src, "sgd_update\\nW_new")
    assert "shape=box" in _line(src, "tanh")


def test_leaves_are_styled_by_kind_and_labelled_with_shape_and_bytes() -> None:
    g = step_graph()
    src = mg.draw(g).source
    assert "shape=invtrapezium" in _line(src, "x\\n[8, 5] float32\\n160 B")
    assert "shape=cylinder" in _line(src, "W\\n[5, 3] float32\\n60 B")
    assert "shape=note" in _line(src, "d_mean_0\\n[] float32\\n4 B")
    # an activation tensor and a gradient tensor: ellipses outlined in their role's colour
    act = _line(src, "tanh_0\\n[8, 3] float32\\n96 B")
    grad = next(ln for ln in src.splitlines() if 'label="add_n_0\\n[8, 3]' in ln)
    assert draw_module.TENSOR_STYLE["activation"][2] in act
    assert draw_module.TENSOR_STYLE["gradient"][2] in grad
    assert "peripheries=2" in next(ln for ln in src.splitlines() if 'label="W_new\\n' in ln)


def test_legend_shows_each_style_used() -> None:
    src = mg.draw(step_graph()).source
    assert "cluster_legend" in src
    for text in ("forward node", "backward node", "update node", "input", "parameter",
                 "constant", "activation", "gradient", "updated parameter"):
        assert "legend" in _line(src, text)


def test_control_dependencies_are_dashed_edges() -> None:
    src = mg.draw(step_graph()).source
    assert "style=dashed" in src


def test_without_tensors_edges_carry_tensor_names_and_shapes() -> None:
    g = step_graph()
    src = mg.draw(g, show_tensors=False).source
    assert 'label="tanh_0\\n[8, 3]"' in src
    assert "tanh_0\\n[8, 3] float32" not in src          # no tensor nodes for activations
    assert "shape=cylinder" in _line(src, "W\\n[5, 3] float32\\n60 B")   # leaves stay


def test_max_nodes_draws_a_prefix_and_says_how_many_are_left_out() -> None:
    g = step_graph()
    src = mg.draw(g, max_nodes=3).source
    assert f"{len(g) - 3} more nodes not drawn" in src
    assert "\tn3 [" not in src


def test_plan_offsets_appear_in_tensor_labels() -> None:
    g = step_graph()
    rep = mg.plan_memory(g, planner="refcount")
    src = mg.draw(g, plan=rep).source
    name, off = next(iter(rep.plan.offsets.items()))
    assert f"@ {off}" in src


# --- rendering in a notebook -----------------------------------------------------------------

def test_mimebundle_is_svg_when_dot_is_installed() -> None:
    pytest.importorskip("graphviz")
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not installed here")
    bundle = mg.draw(step_graph())._repr_mimebundle_()
    assert "image/svg+xml" in bundle and "<svg" in bundle["image/svg+xml"]


def test_missing_dot_gives_dot_source_and_an_install_hint(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "")          # no `dot` on the PATH: ExecutableNotFound
    bundle = mg.draw(step_graph())._repr_mimebundle_()
    assert set(bundle) == {"text/plain"}
    text = bundle["text/plain"]
    assert "apt-get install graphviz" in text and "conda install graphviz" in text
    assert "digraph training {" in text


def test_a_failing_renderer_also_falls_back(monkeypatch) -> None:
    def missing(source, engine="dot", timeout=None):
        raise graphviz.ExecutableNotFound([engine])
    monkeypatch.setattr(draw_module, "render_svg", missing)
    bundle = mg.draw(step_graph())._repr_mimebundle_()
    assert "apt-get install graphviz" in bundle["text/plain"]

    def crash(source, engine="dot", timeout=None):
        raise RuntimeError("dot crashed")
    monkeypatch.setattr(draw_module, "render_svg", crash)
    bundle = mg.draw(step_graph())._repr_mimebundle_()
    assert "dot crashed" in bundle["text/plain"] and "digraph" in bundle["text/plain"]


def test_png_requests_fall_back_too(monkeypatch) -> None:
    monkeypatch.setenv("PATH", "")
    bundle = mg.draw(step_graph())._repr_mimebundle_(include=["image/png"])
    assert "apt-get install graphviz" in bundle["text/plain"]


def test_a_slow_layout_shows_a_smaller_drawing_instead_of_hanging(monkeypatch) -> None:
    import subprocess

    from minigraph.models import lstm
    g = lstm(T=4).graph
    assert len(g) > draw_module.SMALLER_DRAWING
    calls = []

    def slow_for_big(source, engine="dot", timeout=None):
        calls.append(source.count("\tn"))
        if "more nodes not drawn" not in source:
            raise subprocess.TimeoutExpired(["dot"], draw_module.RENDER_TIMEOUT)
        return "<svg>smaller</svg>"
    monkeypatch.setattr(draw_module, "render_svg", slow_for_big)
    bundle = mg.draw(g)._repr_mimebundle_()
    assert bundle == {"image/svg+xml": "<svg>smaller</svg>"}
    assert len(calls) == 2
    # a drawing that is already small says how to draw less instead
    def always_slow(source, engine="dot", timeout=None):
        raise subprocess.TimeoutExpired(["dot"], draw_module.RENDER_TIMEOUT)
    monkeypatch.setattr(draw_module, "render_svg", always_slow)
    text = mg.draw(g, max_nodes=50)._repr_mimebundle_()["text/plain"]
    assert "max_nodes=" in text and "show_tensors=False" in text


def test_big_drawings_ask_dot_for_a_fast_layout() -> None:
    from minigraph.models import lstm
    src = mg.draw(lstm(T=4).graph).source
    assert "splines=line" in src and "mclimit" in src
    assert "splines=line" not in mg.draw(step_graph()).source


def test_without_the_graphviz_package_the_source_is_still_shown(monkeypatch) -> None:
    monkeypatch.setattr(draw_module, "graphviz", None)
    d = mg.draw(step_graph())
    assert isinstance(d, draw_module.DotSource)
    assert d.source.startswith('digraph "training" {')
    assert "cluster_legend" in d.source
    assert "pip install graphviz" in d._repr_mimebundle_()["text/plain"]


def test_viz_package_names_its_modules() -> None:
    import minigraph.viz as viz
    assert viz.draw is draw_module


def test_a_graph_displays_as_its_drawing_in_ipython() -> None:
    # The graph (core) knows nothing of drawing: the face registers the notebook display.
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        draw_module.register_notebook_display()
        data, _ = shell.display_formatter.format(step_graph())
        assert "image/svg+xml" in data or "digraph" in data.get("text/plain", "")
    finally:
        InteractiveShell.clear_instance()


def _points(attr: str) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in attr.split()]


@pytest.mark.parametrize("branches", [1, 12])
def test_the_legend_fits_the_rendered_drawing(branches: int) -> None:
    """Issue 16 point 12: lesson 01's training step (and a wide graph) render no wider than
    MAX_WIDTH, so a notebook, which shows an SVG at its own size and clips the right edge,
    shows the legend; the legend's box lies inside the drawing's own background."""
    import shutil
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot is not installed")
    with mg.name_scope():           # lesson 01, section 4
        x = mg.input("x", (4, 3))
        W = mg.param("W", (3, 2))
        h = x @ W
        for k in range(branches - 1):          # parallel branches widen the drawing
            h = h + mg.sigmoid(x @ mg.param(f"V{k}", (3, 2)))
        loss = mg.mean(mg.sigmoid(h) * h)
        step = mg.training_graph(loss, [W], lr=0.5)
    natural = draw_module.render_svg(mg.draw(step, width=None).source)
    svg = draw_module.render_svg(mg.draw(step).source)
    width = float(re.search(r'<svg width="([\d.]+)pt"', svg).group(1))
    view = [float(v) for v in re.search(r'viewBox="([^"]+)"', svg).group(1).split()]
    assert width <= draw_module.MAX_WIDTH * 72 + 1
    assert view[2] == pytest.approx(width, abs=1)
    natural_width = float(re.search(r'<svg width="([\d.]+)pt"', natural).group(1))
    if branches > 1:
        assert natural_width > draw_module.MAX_WIDTH * 72, "the wide case is wide"
    background = _points(re.search(r'<polygon fill="white" stroke="[^"]+" points="([^"]+)"',
                                   svg).group(1))
    legend = re.search(r"<title>cluster_legend</title>\s*<(?:path|polygon)[^>]*"
                       r'(?:points|d)="([^"]+)"', svg).group(1)
    xs = [float(v) for v in re.findall(r"-?[\d.]+", legend)[0::2]]
    bx = [p[0] for p in background]
    assert min(bx) <= min(xs) and max(xs) <= max(bx), "the legend is inside the drawing"


def test_draw_refuses_a_width_that_is_not_positive() -> None:
    with pytest.raises(mg.MinigraphError, match="-1"):
        mg.draw(step_graph(), width=-1)
