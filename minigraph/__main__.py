"""`python -m minigraph ...` is the `minigraph` console script."""

from .cli import main

raise SystemExit(main())
