"""Resources: `RivetResource` holds the config path and opens the core's objects.

The destination is configured per export in rivet.yaml (local path or S3 bucket with its
own credentials and endpoint), so the core opens it; Dagster needs no separate S3
resource. One resource keeps "which rivet.yaml" in one place, so a job, a check and the
IO manager always see the same config.
"""


import dagster as dg

from rivet_core import api


class RivetResource(dg.ConfigurableResource):
    """The Rivet config a code location serves (path to rivet.yaml)."""

    config_path: str

    def load(self) -> api.RivetConfig:
        return api.load_config(self.config_path)
