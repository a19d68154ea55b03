"""Which columns of a Parquet part are dictionary-encoded, chosen from its first row group.

A Parquet writer dictionary-encodes every column unless told otherwise. For a column whose
values are nearly all distinct (keys, timestamps, UUIDs, amounts, free text) the dictionary
is as large as the data, so the encoder builds a hash table it gains nothing from, and the
file stores each value once in the dictionary page plus an index per row. On the benchmark's
wide `orders` rows (1 M rows, zstd 3, 67 k-row groups) encoding took 1.36 CPU-s for 75.2 MB
with a dictionary for every column, against 0.97 CPU-s for 63.7 MB with the choice below
(docs/benchmarks.md "Parquet dictionaries only where values repeat").

So the part writer samples its first row group before it opens the encoder: a column whose
sampled values are at least `NEARLY_UNIQUE` distinct is written PLAIN, every other column
keeps its dictionary. The choice changes how values are encoded, never what a reader gets
back: the Arrow types, values and Form B checksums are the same either way.

The sample is `SAMPLE_ROWS` rows taken as `SLICES` evenly spaced runs (a group sorted by one
column still shows the others' spread); counting distinct values over it costs a few
milliseconds once per part. The choice is skipped (every column keeps its dictionary, the
writer's default) when the schema has a nested column or a name with a dot: Parquet names
those leaf columns by dotted paths, which a top-level name cannot address safely.
"""

from __future__ import annotations

from rivet_core.lazy_modules import pa, pc

#: Rows sampled from the first row group.
SAMPLE_ROWS = 4096
#: The sample is this many evenly spaced runs of rows.
SLICES = 8
#: A column whose sample is at least this share distinct values is written without a
#: dictionary. 0.9 of 4,096 sampled rows means at least ~0.3 distinct values per row in a
#: 67 k-row group (the bench's `customer_id`, 0.85 per row, is written PLAIN; its `discount`,
#: 0.045, keeps its dictionary).
NEARLY_UNIQUE = 0.9


def sample(table: pa.Table) -> pa.Table:
    """Up to SAMPLE_ROWS rows of `table`, as SLICES evenly spaced runs (zero-copy slices)."""
    if table.num_rows <= SAMPLE_ROWS:
        return table
    run = SAMPLE_ROWS // SLICES
    stride = table.num_rows // SLICES
    return pa.concat_tables([table.slice(i * stride, run) for i in range(SLICES)])


def _distinct_share(column: pa.ChunkedArray) -> float | None:
    """Distinct non-null values per non-null value of `column`; None when it cannot be counted."""
    if isinstance(column.type, pa.BaseExtensionType):  # uuid, json: count their storage
        column = pa.chunked_array([chunk.storage for chunk in column.chunks], column.type.storage_type)
    valid = len(column) - column.null_count
    if valid == 0:
        return None
    try:
        distinct = pc.count_distinct(column, mode="only_valid").as_py()
    except pa.ArrowException:  # a type the kernel cannot count: keep the writer's default
        return None
    return distinct / valid


def _flat(schema: pa.Schema) -> bool:
    """No nested column and no dotted name: every leaf column is addressed by its field name."""
    for field in schema:
        storage = field.type.storage_type if isinstance(field.type, pa.BaseExtensionType) else field.type
        if pa.types.is_nested(storage) or "." in field.name:
            return False
    return True


def dictionary_columns(first_group: pa.Table) -> bool | list[str]:
    """pyarrow's `use_dictionary` for a part whose first row group is `first_group`: True
    (every column) when the choice is skipped, else the names of the columns to keep a
    dictionary for."""
    if first_group.num_rows == 0 or not _flat(first_group.schema):
        return True
    rows = sample(first_group)
    keep = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        share = _distinct_share(column)
        if share is None or share < NEARLY_UNIQUE:
            keep.append(name)
    return keep if len(keep) < rows.num_columns else True
