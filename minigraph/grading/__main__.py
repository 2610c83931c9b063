"""`python -m minigraph.grading ...` is the grader's command (`grading/command.py`)."""

from .command import main

raise SystemExit(main())
