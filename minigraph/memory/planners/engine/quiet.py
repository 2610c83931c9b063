"""The solver's own prints, kept off stdout.

HiGHS (behind `scipy.optimize.milp`) writes a few diagnostics from C++ straight to the
process's file descriptor 1 even with `disp=False`, for instance
"HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();". The
`minigraph plan` command promises that stdout holds only its numbers, so every solver
call runs through `quietly`, which points descriptor 1 at descriptor 2 (stderr) for the
call and back after it.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable
from typing import Any


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers (what the solver printed but has not written yet)."""
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):     # no C library to ask (not on this platform)
        pass


def quietly(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` with file descriptor 1 sent to stderr while it runs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        saved = os.dup(1)
    except OSError:                       # no descriptor 1 at all: nothing to protect
        return fn(*args, **kwargs)
    try:
        os.dup2(2, 1)
        return fn(*args, **kwargs)
    finally:
        _flush_c_stdio()
        os.dup2(saved, 1)
        os.close(saved)
