"""minigraph graphs written as the DTR authors' simulator's logs (simrd_log.py has the format):
inputs, parameters and constants as CONSTANTs, every node a CALL, each tensor RELEASEd
after its last reader, so simrd itself (or `replay_trace`) can replay a minigraph graph.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..files import write_text
from ..graph import Graph
from ..memory.liveness import check_schedule
from ..runtime.dtr.program import CostSpec, node_costs


def write_trace(graph: Graph, dest: Any = None, *, costs: CostSpec = "flops",
                schedule: Sequence[str] | None = None) -> list[str]:
    """`graph` as a DTR simulator trace (JSON lines); written to `dest` (a path or file)
    if given. Inputs, parameters and constants are CONSTANTs; every node is a CALL (TIME
    from `costs`); each tensor is RELEASEd after its last reader; graph outputs stay."""
    order = check_schedule(graph, schedule) if schedule is not None else \
        tuple(n.name for n in graph.nodes)
    cost = node_costs(graph, costs)
    out: list[str] = [json.dumps({"INSTRUCTION": "ANNOTATE", "ANNOTATION": "START"})]
    for t in graph.leaves():
        out.append(json.dumps({"INSTRUCTION": "CONSTANT", "NAME": t.name}))
        out.append(json.dumps({"INSTRUCTION": "MEMORY", "NAME": t.name,
                               "MEMORY": str(t.nbytes)}))
    last: dict[str, str] = {}
    for name in order:
        for i in graph.node(name).inputs:
            last[i] = name
    keep = set(graph.outputs)
    in_bwd = False
    for name in order:
        node = graph.node(name)
        if node.role != "forward" and not in_bwd:
            in_bwd = True
            out.append(json.dumps({"INSTRUCTION": "ANNOTATE", "ANNOTATION": "BACKWARD"}))
        out.append(json.dumps({"INSTRUCTION": "CALL", "NAME": node.op,
                               "RESULT": list(node.outputs), "ARGS": list(node.inputs),
                               "TIME": str(int(round(cost[name])))}))
        for o in node.outputs:
            out.append(json.dumps({"INSTRUCTION": "MEMORY", "NAME": o,
                                   "MEMORY": str(graph.tensors[o].nbytes)}))
            out.append(json.dumps({"INSTRUCTION": "ALIAS", "NAME": o, "ALIAS": "-1"}))
        for t in dict.fromkeys(list(node.inputs) + list(node.outputs)):
            if t in keep:
                continue
            if last.get(t, graph.tensors[t].producer) == name:
                out.append(json.dumps({"INSTRUCTION": "RELEASE", "NAME": t}))
    if dest is not None:
        text = "\n".join(out) + "\n"
        if hasattr(dest, "write"):
            dest.write(text)
        else:
            write_text(dest, text)      # whole or not at all
    return out
