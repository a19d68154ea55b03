"""The export unit: what one run publishes one manifest for (a whole `full`/`incremental`
export, a time window, one time partition, a whole chunked run), resolved from the config
into SQL, parameters, destination and writer options (resolve.py).

Below the pipeline and above the building blocks (source, format, destination): the
runners, the operator tools, `rivet validate` and the table formats all resolve an export
the same way. Nothing is imported here.
"""
