"""pyiceberg's pyarrow file IO, reaching Azure and GCS prefixes with the destination's own settings.

pyiceberg builds a table's file IO from string properties (`py-io-impl` names the class).
For Azure and GCS tables (docs/adr/0009-table-formats.md) the catalog names this class and
passes the table location's options (location.py) under `rivet.`; the filesystems are the
ones the parts are read with (azure_store.py, gcs_store.py), so one resolution of account,
endpoint and credentials serves the writer, the committer and the readers.

An Azure table's location is the form other Iceberg engines read —
`abfs[s]://<container>@<account>.dfs.core.windows.net/<prefix>` — while pyiceberg 0.12's
pyarrow IO would look for an object named `<container>@<account>…/<prefix>`;
`parse_location` keeps only the container, the path pyarrow's AzureFileSystem expects.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.typedef import EMPTY_DICT, Properties

#: The property prefix of the table location's options.
PREFIX = "rivet."
_AZURE = frozenset({"abfs", "abfss", "wasb", "wasbs"})


class RivetFileIO(PyArrowFileIO):
    """PyArrowFileIO whose Azure and GCS filesystems are Rivet's (module docstring)."""

    @staticmethod
    def parse_location(location: str, properties: Properties = EMPTY_DICT) -> tuple[str, str, str]:
        scheme, netloc, path = PyArrowFileIO.parse_location(location, properties)
        if scheme in _AZURE and "@" in netloc:
            path = netloc.split("@", 1)[0] + path[len(netloc):]
        return scheme, netloc, path

    def _options(self) -> dict[str, str]:
        return {k[len(PREFIX):]: v for k, v in self.properties.items() if k.startswith(PREFIX)}

    def _initialize_azure_fs(self) -> Any:
        from rivet_core.tableformat.azure_store import azure_filesystem

        return azure_filesystem("az://", self._options())[0]

    def _initialize_gcs_fs(self) -> Any:
        from rivet_core.tableformat.gcs_store import gcs_filesystem

        return gcs_filesystem(self._options())
