"""`python -m benchmarks` — see benchmarks/harness.py.

`python -m benchmarks --scenario NAME [args]` runs one of the focused scenarios instead
(`SCENARIOS`: a module of this package with a `main(argv)`)."""

import importlib
import sys

SCENARIOS = {"governor_oltp": "benchmarks.governor_oltp", "startup": "benchmarks.startup"}

if len(sys.argv) > 2 and sys.argv[1] == "--scenario":
    if sys.argv[2] not in SCENARIOS:
        sys.exit(f"unknown scenario {sys.argv[2]!r}; known: {', '.join(SCENARIOS)}")
    sys.exit(importlib.import_module(SCENARIOS[sys.argv[2]]).main(sys.argv[3:]))

from benchmarks.harness import main  # noqa: E402 - only when no scenario was asked for

sys.exit(main())
