"""What an operator runs beside exports: `rivet doctor`'s pre-flight checks (doctor.py),
`rivet init`'s scaffolded config (scaffold.py), the reviewable `rivet plan` artifact that
`rivet apply` checks for staleness (plan.py) and the demo database (demo.py).

These sit above the pipeline and below the CLI (rivet_core/cli/): each module may use the
engine, and none is imported by it. Nothing is imported here, so `rivet --help` stays light.
"""
