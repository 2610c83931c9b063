"""Experiments: what runs several techniques to compare or measure them. Each module
returns plain records (rows, runs, measurements) that `minigraph.viz` draws:

- `techniques`: every planner on one graph, and DTR at a budget or over a sweep of budgets;
- `dtr`: DTR sweeps over heuristics and budgets (`SweepRow`, `sweep`, `format_rows`);
- `allocators`: the online allocators beside the static planners, on a schedule or a DTR run;
- `pool`: CuPy's real memory pool on a GPU beside its simulation;
- `training`: SGD steps of a zoo model, with or without a plan;
- `plan_cli`: the `minigraph plan` command.
"""
