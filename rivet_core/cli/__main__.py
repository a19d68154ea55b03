"""`python -m rivet_core.cli …`: the same command line as the `rivet` console script."""

from rivet_core.cli.entry import console

console()
