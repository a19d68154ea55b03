"""Load-time limits a config must respect before anything runs.

- **Numeric bounds**: every numeric field has a ceiling (and a floor where the strict parse
  or `validate.py` does not already check one). `throttle_ms: 1e14` used to load and then
  fail at run time with a cryptic overflow; now the load names the field and the limit:
  "`throttle_ms` at source.tuning must be <= 3600000 (got 100000000000000)".
- **Destination keys**: export names and destination path pieces become file names and
  object keys, so characters no filesystem or S3 tool handles safely (control characters,
  `: * ? " < > |`, invisible format characters) are refused at load — before a folder exists.
- **Shared destinations** (docs/adr/0011-shared-destination-prefixes.md): Rivet accepts
  several exports on one prefix, so their configs load here too — each such export writes
  its whole trail (`data/`, `manifest.json`, `_SUCCESS`, state it lists) in a sub-folder
  named after it, inserted where the prefix stops being fixed (`out` → `out/orders`,
  `raw/{date}/` → `raw/orders/{date}/`), so no two trails ever share a folder and every
  listing, verification, gc and quarantine stays the export's own. One warning per load
  names the exports and the `{export}` fix. Refused: a table export (Delta/Iceberg) on a
  shared prefix — a table's location is what other engines read, so it is not moved — and
  a pair still nested after the move.

Ceilings are far above any sensible setting; they only stop values that cannot work (a
timeout of 3,000 years, 10^20 retries, a sleep longer than the process lives).
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from rivet_core.config.models import ExportConfig, RivetConfig

#: PostgreSQL keeps statement/lock timeouts in int32 milliseconds: 2,147,483 s (~24.8 days).
_PG_TIMEOUT_MAX_S = 2_147_483
#: Row counts are BIGINT in the state store.
_I64_MAX = 2**63 - 1

#: field → (minimum or None when checked elsewhere, maximum)
TUNING_BOUNDS: dict[str, tuple[int | None, int]] = {
    "batch_size": (None, 10_000_000),
    "batch_size_memory_mb": (None, 65_536),
    "throttle_ms": (None, 3_600_000),
    "statement_timeout_s": (None, _PG_TIMEOUT_MAX_S),
    "max_retries": (None, 100),
    "retry_backoff_ms": (None, 3_600_000),
    "lock_timeout_s": (None, _PG_TIMEOUT_MAX_S),
    "memory_threshold_mb": (None, 1_048_576),
    "max_batch_memory_mb": (None, 65_536),
    "min_parallel": (None, 256),
    "max_value_mb": (None, 2_048),
}
EXPORT_BOUNDS: dict[str, tuple[float | None, float]] = {
    "days_window": (None, 36_600),
    "chunk_size": (None, 1_000_000_000),
    "chunk_size_memory_mb": (1, 65_536),
    "chunk_count": (None, 1_000_000),
    "chunk_by_days": (None, 36_600),
    "parallel": (None, 256),
    "chunk_max_attempts": (1, 100),
    "wave": (0, 10_000),
    "shape_drift_warn_factor": (None, 1_000_000),
}
QUALITY_BOUNDS: dict[str, tuple[int | None, int]] = {
    "row_count_min": (None, _I64_MAX),
    "row_count_max": (None, _I64_MAX),
    "unique_max_entries": (None, 100_000_000),
}
PARQUET_BOUNDS: dict[str, tuple[int | None, int]] = {
    "row_group_rows": (None, 67_108_864),
    "target_row_group_mb": (None, 65_536),
    "max_row_group_mb": (None, 65_536),
}
WEBHOOK_BOUNDS: dict[str, tuple[float | None, float]] = {"timeout_s": (None, 300)}
#: `exports[].retention`: a million runs, a century, ten years of grace.
RETENTION_BOUNDS: dict[str, tuple[float | None, float]] = {
    "keep_runs": (None, 1_000_000), "keep_days": (None, 36_600), "grace_hours": (None, 87_600),
}
#: `max_file_size` ceiling (bytes): one part of 1 TiB is already far past any sane split.
MAX_FILE_SIZE_BYTES = 1024**4

# ------------------------------------------------------------------------------ bounds


def upper_bound(loc: tuple[Any, ...]) -> float | None:
    """The ceiling of the numeric field at a pydantic error location, if it has one."""
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return None
    field, parents = names[-1], names[:-1]
    table: dict[str, tuple[Any, Any]] = (
        TUNING_BOUNDS if "tuning" in parents else QUALITY_BOUNDS if "quality" in parents
        else PARQUET_BOUNDS if "parquet" in parents else WEBHOOK_BOUNDS if "webhook" in parents
        else RETENTION_BOUNDS if "retention" in parents
        else EXPORT_BOUNDS if parents == ["exports"] else {})
    bound = table.get(field)
    return None if bound is None else bound[1]


def _fmt(value: Any) -> str:
    raw = getattr(value, "raw", None)
    return raw if isinstance(raw, str) else repr(value)


def _bounded(block: Any, bounds: dict[str, tuple[Any, Any]], where: str) -> list[str]:
    errors: list[str] = []
    if block is None:
        return errors
    for field, (low, high) in bounds.items():
        value = getattr(block, field, None)
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, float) and value != value:  # NaN compares false everywhere
            errors.append(f"`{field}` at {where} must be a number from "
                          f"{0 if low is None else low} to {high} (got {_fmt(value)})")
        elif value > high:
            errors.append(f"`{field}` at {where} must be <= {high} (got {_fmt(value)}) — "
                          f"use a value up to {high}")
        elif low is not None and value < low:
            errors.append(f"`{field}` at {where} must be >= {low} (got {_fmt(value)})")
    return errors


def bound_errors(cfg: RivetConfig) -> list[str]:
    """Every numeric field outside its bounds, one message each naming field and limit."""
    errors = _bounded(cfg.source.tuning, TUNING_BOUNDS, "source.tuning")
    for index, exp in enumerate(cfg.exports):
        where = f"exports[{index}]"  # the location style of the strict parse's messages
        errors += _bounded(exp, EXPORT_BOUNDS, where)
        errors += _bounded(exp.tuning, TUNING_BOUNDS, f"{where}.tuning")
        errors += _bounded(exp.quality, QUALITY_BOUNDS, f"{where}.quality")
        errors += _bounded(exp.parquet, PARQUET_BOUNDS, f"{where}.parquet")
        errors += _bounded(exp.retention, RETENTION_BOUNDS, f"{where}.retention")
        size = _file_size(exp)
        if size is not None and size > MAX_FILE_SIZE_BYTES:
            errors.append(f"`max_file_size` at {where} must be <= 1024GB (got "
                          f"{exp.max_file_size}) — use a size up to 1024GB, e.g. '512MB'")
    if cfg.notifications is not None:
        errors += _bounded(cfg.notifications.webhook, WEBHOOK_BOUNDS, "notifications.webhook")
    return errors


def _file_size(exp: ExportConfig) -> int | None:
    from rivet_core.errors import ConfigError

    try:
        return exp.max_file_size_bytes
    except ConfigError:  # reported by validate._compression_errors
        return None


# --------------------------------------------------------------------- destination keys

#: Characters Windows, S3 tooling and shells cannot carry safely in a file or key name.
_KEY_UNSAFE = set(':*?"<>|')
#: A name must fit one file name (255 bytes) with `manifest-<run id>.json` around it.
MAX_NAME_BYTES = 200


def _bad_chars(text: str, extra: set[str]) -> list[str]:
    bad = []
    for ch in text:
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or ch in extra:
            shown = repr(ch)[1:-1] if not ch.isprintable() else ch
            if shown not in bad:
                bad.append(shown)
    return bad


def _listed(chars: list[str]) -> str:
    return ", ".join(f"'{c}'" for c in chars)


def key_name_problem(name: str) -> str | None:
    """Why an export name cannot be a destination key / file name, or None. (Path
    separators and `..` are `validate.name_error`'s rule.)"""
    shown = "".join(repr(c)[1:-1] if not c.isprintable() else c for c in name)
    bad = _bad_chars(name, _KEY_UNSAFE)
    if bad:
        return (f"export name '{shown}' contains {_listed(bad)}, which cannot "
                "be part of a file name or object key — use letters, digits, '_', '-', '.' or "
                "spaces, e.g. orders_daily")
    if name != name.strip():
        return (f"export name '{shown}' starts or ends with whitespace, which would be invisible "
                "in file names and keys — remove it")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        return (f"export name '{shown[:40]}…' is {len(name.encode('utf-8'))} bytes long — at most "
                f"{MAX_NAME_BYTES} bytes (UTF-8) fit a file name with rivet's suffixes; shorten it")
    return None


def destination_key_errors(exp: ExportConfig, label: str) -> list[str]:
    """Control / invisible characters in destination path pieces (and, for S3 prefixes and
    buckets, the characters object keys cannot carry safely)."""
    errors = []
    dest = exp.destination
    for field in ("path", "prefix", "bucket"):
        value = getattr(dest, field)
        if not value:
            continue
        extra = (_KEY_UNSAFE - {":"} if dest.type in ("s3", "gcs", "azure") and field == "prefix"
                 else set())
        bad = [b for b in _bad_chars(value, extra) if b != "\\x00"]  # NUL: its own message
        if bad:
            errors.append(f"{label}: destination.{field} contains {_listed(bad)}, "
                          "which cannot be part of a file name or object key — remove it")
    return errors


# ------------------------------------------------------------------ overlapping prefixes

_TOKEN = re.compile(r"\{([^{}]*)\}")


def _static_parts(template: str, export_name: str) -> list[str]:
    """The path components of `template` that are the same on every run: `{export}` and
    `{table}` filled in, cut before the first component holding a run-dependent token."""
    text = _TOKEN.sub(lambda m: export_name if m.group(1) in ("export", "table") else m.group(0),
                      template)
    parts = []
    for part in re.split(r"[\\/]+", text):
        if "{" in part:
            break
        if part and part != ".":
            parts.append(part)
    return parts


def destination_root(cfg: RivetConfig, exp: ExportConfig) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(identity of the store, path components of the export's fixed root), None for stdout."""
    dest = exp.destination
    if dest.type == "local":
        base = dest.path or dest.prefix or "."
        static = _static_parts(base, exp.name)
        anchor = "/" if os.path.isabs(base) else str(cfg.config_dir)
        root = os.path.normpath(os.path.join(anchor, *static))
        return ("local",), tuple(Path(root).parts)
    if dest.type in ("s3", "gcs", "azure"):
        return ((dest.type, dest.endpoint or "", dest.bucket or "", dest.account_name or ""),
                tuple(_static_parts(dest.prefix or "", exp.name)))
    return None


def _shown(parts: tuple[str, ...], store: tuple[str, ...]) -> str:
    if store == ("local",):
        return os.path.join(*parts) if parts else "."
    scheme = {"s3": "s3", "gcs": "gs", "azure": "az"}[store[0]]
    return f"{scheme}://{store[2]}/" + "".join(f"{p}/" for p in parts)


def _overlapping_pairs(roots: list[tuple[Any, Any]]) -> list[tuple[int, int]]:
    """The index pairs (i < j, in config order) of roots that are equal or nested: each root
    looks up its own prefixes in an index of all roots, so 1,000 exports cost 1,000 lookups
    per path depth, not the 500,000 comparisons of every pair (an orchestrator's code location
    loads this config once per process)."""
    index: dict[tuple[Any, tuple[str, ...]], list[int]] = {}
    for i, (_, root) in enumerate(roots):
        if root is not None:
            index.setdefault((root[0], root[1]), []).append(i)
    pairs: set[tuple[int, int]] = set()
    for j, (_, root) in enumerate(roots):
        if root is None:
            continue
        for depth in range(len(root[1]) + 1):
            for i in index.get((root[0], root[1][:depth]), ()):
                if i != j:
                    pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)


def _overlaps(cfg: RivetConfig) -> list[tuple[ExportConfig, ExportConfig, str]]:
    """(inner export, outer export, what the two share) for each pair of exports whose
    destination roots are equal or nested."""
    roots = [(exp, destination_root(cfg, exp)) for exp in cfg.exports]
    found = []
    for i, j in _overlapping_pairs(roots):
        (first, a), (second, b) = roots[i], roots[j]
        if first.name == second.name:
            continue
        (inner, inner_exp), (outer, outer_exp) = sorted(
            ((a[1], first), (b[1], second)), key=lambda t: len(t[0]), reverse=True)
        if inner[:len(outer)] != outer:
            continue
        if inner == outer:
            problem = (f"exports '{first.name}' and '{second.name}' write to the same "
                       f"destination {_shown(inner, a[0])}")
        else:
            problem = (f"export '{inner_exp.name}' writes inside the destination of export "
                       f"'{outer_exp.name}' ({_shown(inner, a[0])} is inside {_shown(outer, a[0])})")
        found.append((inner_exp, outer_exp, problem))
    return found


def _fix(exp: ExportConfig) -> str:
    return ("{export} in the path, e.g. path: out/{export}" if exp.destination.type == "local" else
            "{export} in the prefix, e.g. prefix: raw/{export}/")


def overlap_errors(cfg: RivetConfig) -> list[str]:
    """One message per pair of exports whose destination roots are still equal or nested
    after `nest_shared_prefixes` moved each shared export into its own sub-folder (a pair
    with a table export is `nest_shared_prefixes`'s refusal already)."""
    return [f"{problem} — each export needs a prefix of its own (the second run replaces the first's "
            f"manifest.json, and validating one checks the other's data); put {_fix(inner)}"
            for inner, outer, problem in _overlaps(cfg)
            if inner.table_format is None and outer.table_format is None]


def _with_export_folder(template: str | None, name: str, cloud: bool) -> str:
    """`template` with a path component `name` inserted where its fixed part ends (before the
    first component holding a run-dependent token such as `{date}` or `{partition}`)."""
    if not template or template in (".", "./"):
        return name + "/" if cloud else (template.rstrip("/") + "/" + name if template else name)
    pieces = template.split("/")
    at = next((k for k, piece in enumerate(pieces)
               if _TOKEN.search(_TOKEN.sub(lambda m: "" if m.group(1) in ("export", "table") else m.group(0),
                                           piece))), len(pieces))
    if at == len(pieces) and len(pieces) > 1 and pieces[-1] == "":
        at -= 1  # a trailing slash stays trailing
    pieces.insert(at, name)
    return "/".join(pieces)


def _groups(overlaps: list[tuple[ExportConfig, ExportConfig, str]]) -> str:
    """The sharing exports as connected groups ('a', 'b', 'c'; 'd', 'e'), in config order —
    one line for any number of pairs."""
    group: dict[str, set[str]] = {}
    order: list[str] = []
    for inner, outer, _ in overlaps:
        for name in (inner.name, outer.name):
            if name not in group:
                group[name] = {name}
                order.append(name)
        joined = group[inner.name] | group[outer.name]
        for name in joined:
            group[name] = joined
    seen: list[set[str]] = []
    for name in order:
        if group[name] not in seen:
            seen.append(group[name])
    return "; ".join(", ".join(f"'{n}'" for n in order if n in g) for g in seen)


def _where(exp: ExportConfig) -> str:
    dest = exp.destination
    return (dest.path if dest.type == "local" and dest.path is not None else dest.prefix) or ""


def _move_into_own_folder(exp: ExportConfig) -> None:
    """Give `exp` its own sub-folder of its destination (module docstring)."""
    dest = exp.destination
    cloud = dest.type != "local"
    field = "prefix" if cloud or (dest.path is None and dest.prefix is not None) else "path"
    exp.destination = dest.model_copy(update={field: _with_export_folder(getattr(dest, field), exp.name, cloud)})


def nest_shared_prefixes(cfg: RivetConfig) -> tuple[list[str], list[str]]:
    """Move every export that shares its destination (equal or nested roots) into a
    sub-folder named after it (module docstring). Returns (errors, warnings): a table
    export on a shared destination is refused (its pair is not moved); one warning lists
    the moves."""
    overlaps = _overlaps(cfg)
    errors = sorted({
        f"{problem}, and '{exp.name}' commits a {exp.table_format} table there — a table's location is "
        "what other engines read, so it is not moved into a sub-folder and no other export's files may "
        f"sit in it; give each export its own prefix: put {_fix(exp)}"
        for inner, outer, problem in overlaps for exp in (inner, outer) if exp.table_format is not None})
    movable = [o for o in overlaps if o[0].table_format is None and o[1].table_format is None]
    if not movable:
        return errors, []
    moved = {exp.name: exp for inner, outer, _ in movable for exp in (inner, outer)}
    for exp in moved.values():
        _move_into_own_folder(exp)
    problems = movable[0][2] if len(movable) == 1 else (
        f"{len(moved)} exports write to the same destination or inside one another's ({_groups(movable)})")
    now = ", ".join(f"'{exp.name}' → {_where(exp)}" for exp in moved.values())
    warning = (f"{problems} — as in Rivet, this is accepted, but here each export keeps its own trail "
               f"(data/, manifest.json, _SUCCESS) in a sub-folder named after it: {now}, so each "
               "validates against its own parts and gc or a resume never touches another's files; put "
               "{export} in the path or prefix (path: out/{export}, prefix: raw/{export}/) to say so in "
               "the config and silence this warning")
    return errors, [warning]
