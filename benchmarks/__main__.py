"""`python -m benchmarks` — see benchmarks/harness.py."""

import sys

from benchmarks.harness import main

sys.exit(main())
