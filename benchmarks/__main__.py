"""`python -m benchmarks` — see benchmarks/harness.py.

`python -m benchmarks --scenario NAME [args]` runs one of the focused scenarios instead
(`SCENARIOS`: a module of this package with a `main(argv)`, or `module:function`)."""

import importlib
import sys
from pathlib import Path

from benchmarks.bytecode import compile_tree

compile_tree(Path(__file__).resolve().parent.parent)  # as installed (benchmarks/bytecode.py)

SCENARIOS = {"governor_oltp": "benchmarks.governor_oltp", "startup": "benchmarks.startup",
             "form-b": "benchmarks.form_b",
             "dagster-full": "benchmarks.dagster_path:main_full",
             "dagster-chunked": "benchmarks.dagster_path:main_chunked",
             "dagster-many": "benchmarks.dagster_many", "cdc-drain": "benchmarks.cdc_drain"}

if len(sys.argv) > 2 and sys.argv[1] == "--scenario":
    if sys.argv[2] not in SCENARIOS:
        sys.exit(f"unknown scenario {sys.argv[2]!r}; known: {', '.join(SCENARIOS)}")
    module, _, function = SCENARIOS[sys.argv[2]].partition(":")
    sys.exit(getattr(importlib.import_module(module), function or "main")(sys.argv[3:]))

from benchmarks.harness import main  # noqa: E402 - only when no scenario was asked for

sys.exit(main())
