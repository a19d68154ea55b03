"""`open_writer`: the one place that maps `WriterOptions.format` to a concrete writer.

Apart from base.py because the concrete writers (csv.py, parquet.py) subclass base.py's
`FormatWriter`: with the factory in base.py the base imported its own subclasses, a cycle.
"""

from __future__ import annotations

from pathlib import Path

from rivet_core.errors import ConfigError
from rivet_core.format.base import FORMATS, FormatWriter, WriterOptions
from rivet_core.lazy_modules import pa


def open_writer(path: Path, schema: pa.Schema, options: WriterOptions) -> FormatWriter:
    """Create the file at `path` and return a writer for `options.format`.

    CSV rejects unrepresentable columns (lists, decimal256, non-UUID fixed binary) here,
    before the file is created.
    """
    # Imported here, not at the top: a process that writes only one format never loads the
    # other's encoder (pyarrow.parquet / the CSV writer), and importing rivet_core.format stays light.
    from rivet_core.format.csv import CsvWriter
    from rivet_core.format.parquet import ParquetFileWriter

    if options.format == "parquet":
        return ParquetFileWriter(Path(path), schema, options)
    if options.format == "csv":
        return CsvWriter(Path(path), schema, options)
    raise ConfigError(f"unknown format '{options.format}': expected one of {', '.join(FORMATS)}")
