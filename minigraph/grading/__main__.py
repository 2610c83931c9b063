"""`python -m minigraph.grading ...` is the grader's command (`grading/sandbox/command.py`)."""

from .sandbox.command import main

raise SystemExit(main())
