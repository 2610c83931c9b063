"""nbgrader's configuration for the minigraph course (docs/teaching.md walks through a round).

The source notebooks are written by `python make_source.py` from the assignment notebooks and
the reference solutions; `nbgrader generate_assignment a1` puts the stub back in place of the
solution. Where the exchange lives (`c.Exchange.root`, /srv/nbgrader/exchange by default) is
JupyterHub's business: set it in the global nbgrader_config.py that students share.
"""

c = get_config()  # noqa: F821  (nbgrader defines it)

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
