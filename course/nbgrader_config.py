"""nbgrader's configuration for the minigraph course (docs/teaching.md walks through a round).

The source notebooks are written by `python make_source.py` from the assignment notebooks and
the reference solutions; `nbgrader generate_assignment a1` puts the stub back in place of the
solution.

The exchange (where `release_assignment` puts a release and `submit` a hand-in) is this
folder's `exchange/`, made on first use, so that the course works as shipped, with no global
configuration: on one machine, students pass `--Exchange.root=<this folder>/exchange` (or
set it in their own nbgrader_config.py). Where a global nbgrader_config.py already names an
exchange (JupyterHub's, /srv/nbgrader/exchange), that one stands: students share it.
"""

from pathlib import Path

from jupyter_core.paths import jupyter_config_path
from traitlets.config.loader import PyFileConfigLoader

c = get_config()  # noqa: F821  (nbgrader defines it)

COURSE = Path(__file__).parent      # not resolved: a course folder may link to these files
EXCHANGE = COURSE / "exchange"


def global_exchange() -> str | None:
    """The exchange a global nbgrader_config.py (a JupyterHub's) names, if one does."""
    for folder in jupyter_config_path():
        if (Path(folder) / "nbgrader_config.py").is_file():
            loaded = PyFileConfigLoader("nbgrader_config.py", path=folder).load_config()
            if "root" in loaded.get("Exchange", {}):
                return loaded.Exchange.root
    return None


if global_exchange() is None:
    EXCHANGE.mkdir(exist_ok=True)       # nbgrader refuses an exchange that does not exist
    c.Exchange.root = str(EXCHANGE)

c.CourseDirectory.course_id = "minigraph"
c.CourseDirectory.assignment_id = ""              # name it on the command line: a1, a2, a3

# The stub the students' notebooks have: the release is then exactly that notebook.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError"}

# A check cell runs dozens of cases (A3: a dozen DTR runs of real models): allow minutes, not
# nbgrader's 30 s per cell. On a slow grading machine, also export MINIGRAPH_TIME_SCALE=3.
c.Execute.timeout = 600

# autograde stores the sandboxed grader's score, not the one the student's kernel printed
# (a notebook can replace the check there): `SandboxedScore` (sandboxed_score.py) runs
# right after Execute and makes the check cell's result `python -m minigraph.grading`'s.
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # sandboxed_score.py beside
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    Execute,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)
from sandboxed_score import SandboxedScore  # noqa: E402

# nbgrader 0.9's list (nbgrader/converters/autograde.py), SandboxedScore after Execute.
c.Autograde.autograde_preprocessors = [Execute, SandboxedScore, IgnorePattern,
                                       ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                       AssignLatePenalties, CheckCellMetadata]
