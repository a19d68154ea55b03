"""Issue 20 items 3 (config part), 5, 9 and 10: what a config must respect at load.

- an alias bomb fails fast with one error naming the problem and the fix (item 5);
- out-of-range numbers are refused at load, naming the field and "must be <= N" (item 9);
- export names and destination pieces that cannot be file names / object keys are refused
  before any folder exists (item 10);
- two exports whose destinations are the same, or one inside the other, are refused with
  both names (item 3).

Every case runs the real CLI (in-process) and checks the exit code, the single error and that
nothing was created next to the config.
"""

from __future__ import annotations

import logging
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rivet_core.config.limits import EXPORT_BOUNDS, QUALITY_BOUNDS, TUNING_BOUNDS
from rivet_core.config.yamlload import AliasBombError, check_alias_expansion, load_yaml
from tests.hardening.support import cli
from tests.helpers import REPO

_EXPORT = {"name": "items", "table": "items", "format": "parquet",
           "destination": {"type": "local", "path": "out"}}


def _write(tmp: Path, exports: list[dict], source_extra: dict | None = None, text: str | None = None) -> Path:
    path = tmp / "rivet.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(
        {"source": {"type": "sqlite", "url": "sqlite:///src.db", **(source_extra or {})},
         "exports": exports}, sort_keys=False, allow_unicode=True))
    return path


def _one_error(tmp: Path, config: Path, command: str = "check") -> str:
    result = cli(command, "-c", str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("Error:") == 1 and "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp.iterdir()) == ["rivet.yaml"]  # no folder, no state store
    return result.stderr


# ================================================================= item 5: the alias bomb

def _bomb(levels: int = 9, fan: int = 9) -> str:
    """The issue's shape: a `load:` block (ignored by extract commands) of nested aliases."""
    lines = ["source: {type: sqlite, url: 'sqlite:///src.db'}", "exports:",
             "  - {name: items, table: items, format: parquet, destination: {type: local, path: out}}",
             "load:", "  a0: &a0 [" + ",".join(['"lol"'] * fan) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fan) + "]")
    return "\n".join(lines) + "\n"


def test_the_issues_600_byte_alias_bomb_fails_fast_with_one_clear_error_on_every_command(tmp_path):
    text = _bomb()
    assert len(text.encode()) < 700
    config = _write(tmp_path, [], text=text)
    for command in ("check", "plan", "run", "validate", "doctor"):
        started = time.monotonic()
        result = cli(command, "-c", str(config))
        assert time.monotonic() - started < 20, command  # not minutes of expansion
        out = result.stdout + result.stderr
        assert result.returncode == 1, (command, out)
        assert "expand this document by more than 100,000 nodes" in out, (command, out)
        assert "write the repeated blocks out" in out  # the fix
        assert "MemoryError" not in out and "Traceback" not in out and "internal error" not in out


def test_the_bomb_in_a_fresh_process_under_a_memory_cap_is_a_clean_exit_1(tmp_path):
    """The binary, as reported: capped at 1 GiB of address space it must still answer (the
    unbounded expansion needed 7 GB)."""
    config = _write(tmp_path, [], text=_bomb())

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))

    proc = subprocess.run([sys.executable, "-m", "rivet_core.cli", "plan", "-c", str(config)],
                          capture_output=True, text=True, cwd=REPO, timeout=120, preexec_fn=cap)  # noqa: PLW1509
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("Error: invalid YAML") and "alias bomb" in proc.stderr
    assert "panic" not in proc.stderr.lower() and "Traceback" not in proc.stderr


def test_recursive_aliases_are_refused_and_ordinary_merges_still_load(tmp_path):
    with pytest.raises(AliasBombError, match="refers to the node that contains it"):
        load_yaml("a: &a [1, *a]\n")
    # shared defaults merged into many exports: the normal use of aliases
    defaults = "defaults: &d {table: items, format: parquet}\n"
    exports = "".join(f"  - {{<<: *d, name: e{i}, destination: {{type: local, path: out/e{i}}}}}\n"
                      for i in range(300))
    data = load_yaml(defaults + "exports:\n" + exports)
    assert len(data["exports"]) == 300 and data["exports"][299]["format"] == "parquet"


def test_the_budget_counts_expanded_nodes_not_distinct_ones():
    import yaml as pyyaml

    from rivet_core.config.yamlload import CoreLoader

    node = CoreLoader("a: &a [" + ",".join(["x"] * 100) + "]\nb: [" + ",".join(["*a"] * 100) + "]\n").get_single_node()
    check_alias_expansion(node, budget=10_200)  # ~10,100 added: inside
    with pytest.raises(AliasBombError):
        check_alias_expansion(node, budget=9_000)
    flat = pyyaml.compose("[" + ",".join(["x"] * 50_000) + "]", Loader=CoreLoader)
    check_alias_expansion(flat, budget=0)  # big but alias-free: nothing is added


# ======================================================================= item 9: bounds

@pytest.mark.parametrize(("where", "field", "value", "limit"), [
    ("source.tuning", "throttle_ms", "1e14", TUNING_BOUNDS["throttle_ms"][1]),
    ("source.tuning", "statement_timeout_s", "99999999999", TUNING_BOUNDS["statement_timeout_s"][1]),
    ("source.tuning", "max_retries", "1e20", TUNING_BOUNDS["max_retries"][1]),
    ("source.tuning", "lock_timeout_s", ".inf", TUNING_BOUNDS["lock_timeout_s"][1]),
    ("exports[0].tuning", "retry_backoff_ms", "1e14", TUNING_BOUNDS["retry_backoff_ms"][1]),
    ("exports[0].tuning", "batch_size", "99999999999", TUNING_BOUNDS["batch_size"][1]),
    ("exports[0]", "parallel", "100000", EXPORT_BOUNDS["parallel"][1]),
    ("exports[0]", "days_window", "1e9", EXPORT_BOUNDS["days_window"][1]),
    ("exports[0].quality", "unique_max_entries", "1e12", QUALITY_BOUNDS["unique_max_entries"][1]),
])
def test_out_of_range_numbers_are_refused_at_load_naming_the_field_and_the_limit(
        tmp_path, where, field, value, limit):
    export = dict(_EXPORT)
    source = "source: {type: sqlite, url: 'sqlite:///src.db'"
    if where == "source.tuning":
        source += f", tuning: {{{field}: {value}}}"
    elif where == "exports[0].tuning":
        export["tuning"] = "@@"
    elif where == "exports[0].quality":
        export["quality"] = "@@"
    elif field == "days_window":
        export.update(mode="time_window", time_column="t", days_window="@@")
    else:
        export.update(mode="chunked", chunk_column="id", parallel="@@")
    body = yaml.safe_dump([export], sort_keys=False)
    body = body.replace("'@@'", value if where == "exports[0]" else f"{{{field}: {value}}}")
    text = f"{source}}}\nexports:\n" + "".join(f"  {ln}\n" for ln in body.splitlines())
    message = _one_error(tmp_path, _write(tmp_path, [], text=text))
    assert f"`{field}` at {where}" in message
    assert f"must be <= {limit} (got " in message


def test_every_bound_allows_its_own_limit(tmp_path):
    config = _write(tmp_path, [{**_EXPORT, "tuning": {k: v for k, (_, v) in TUNING_BOUNDS.items()
                                                     if k not in ("batch_size_memory_mb",)}}],
                    {"tuning": {"throttle_ms": TUNING_BOUNDS["throttle_ms"][1]}})
    result = cli("check", "-c", str(config))
    assert "must be <=" not in result.stderr  # (the source DB is missing: a later, other error)


# ================================================================ item 10: key-safe names

@pytest.mark.parametrize(("name", "shown"), [
    ("x:y*z?", "':', '*', '?'"), ("tab\there", "'\\t'"), ("bell\x07", "'\\x07'"),
    ("new\nline", "'\\n'"), ("rtl\u202eevil", "'\\u202e'"), ("pipe|lt<gt>", "'|', '<', '>'"),
    ('quote"d', "'\"'"), (" padded", "whitespace"), ("x" * 201, "bytes long"),
])
def test_names_that_cannot_be_keys_are_refused_before_any_folder_exists(tmp_path, name, shown):
    config = _write(tmp_path, [{**_EXPORT, "name": name}])
    for command in ("check", "run"):
        message = _one_error(tmp_path, config, command)
        assert shown in message and "export name" in message


@pytest.mark.parametrize("field", ["path", "prefix"])
def test_destination_pieces_with_control_characters_are_refused(tmp_path, field):
    config = _write(tmp_path, [{**_EXPORT, "destination": {"type": "local", field: "out\tx/{export}"}}])
    message = _one_error(tmp_path, config, "run")
    assert f"destination.{field} contains '\\t'" in message


def test_names_like_a_space_or_unicode_still_run(tmp_path):
    db = tmp_path / "src.db"
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)")
        conn.execute("INSERT INTO items VALUES (1), (2)")
    config = _write(tmp_path, [{**_EXPORT, "name": "a b", "destination": {"type": "local", "path": "out/{export}"}},
                               {**_EXPORT, "name": "ünï", "destination": {"type": "local", "path": "out/{export}"}}])
    result = cli("run", "-c", str(config))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "a b" / "manifest.json").exists()
    assert (tmp_path / "out" / "ünï" / "manifest.json").exists()


# ======================================================= item 3: overlapping destinations

@pytest.mark.parametrize(("first", "second", "expected", "moved"), [
    ({"type": "local", "path": "out"}, {"type": "local", "path": "out"},
     "exports 'one' and 'two' write to the same destination", ("out/one", "out/two")),
    ({"type": "local", "path": "out"}, {"type": "local", "path": "./out/two"},
     "export 'two' writes inside the destination of export 'one'", ("out/one", "./out/two/two")),
    ({"type": "local", "path": "out/{export}/x"}, {"type": "local", "path": "out/one"},
     "export 'one' writes inside the destination of export 'two'", ("out/{export}/x/one", "out/one/two")),
    ({"type": "local", "path": "{date}/"}, {"type": "local", "path": "data"},
     "export 'two' writes inside the destination of export 'one'", ("one/{date}/", "data/two")),
    ({"type": "s3", "bucket": "b", "prefix": "raw/"}, {"type": "s3", "bucket": "b", "prefix": "raw"},
     "exports 'one' and 'two' write to the same destination s3://b/raw/", ("raw/one/", "raw/two")),
    ({"type": "s3", "bucket": "b", "prefix": "raw/"}, {"type": "s3", "bucket": "b", "prefix": "raw/{export}/"},
     "export 'two' writes inside the destination of export 'one' (s3://b/raw/two/ is inside s3://b/raw/)",
     ("raw/one/", "raw/{export}/two/")),
    ({"type": "local", "path": "out/{partition}"}, {"type": "local", "path": "out/{partition}/x"},
     "exports 'one' and 'two' write to the same destination", ("out/one/{partition}", "out/two/{partition}/x")),
])
def test_a_shared_destination_loads_with_each_export_in_a_folder_of_its_own_and_one_warning(
        tmp_path, caplog, first, second, expected, moved):
    from rivet_core.config import load_config

    partitioned = {"partition_by": "created"} if "{partition}" in str(first) else {}
    config = _write(tmp_path, [{**_EXPORT, **partitioned, "name": "one", "destination": first},
                               {**_EXPORT, **partitioned, "name": "two", "destination": second}])
    with caplog.at_level(logging.WARNING, logger="rivet.config"):
        loaded = load_config(config)
    dests = tuple(e.destination.path if e.destination.type == "local" and e.destination.path is not None
                  else e.destination.prefix for e in loaded.exports)
    assert dests == moved
    warnings = [r.getMessage() for r in caplog.records if expected in r.getMessage()]
    assert len(warnings) == 1 and "{export}" in warnings[0] and "'one' → " in warnings[0]


@pytest.mark.parametrize(("first", "second", "expected"), [
    # still nested after the move: 'two' would sit inside 'one''s own folder
    ({"type": "local", "path": "out"}, {"type": "local", "path": "out/one"},
     "export 'two' writes inside the destination of export 'one'"),
])
def test_destinations_still_nested_after_the_move_are_refused_naming_both_exports(
        tmp_path, first, second, expected):
    config = _write(tmp_path, [{**_EXPORT, "name": "one", "destination": first},
                               {**_EXPORT, "name": "two", "destination": second}])
    message = _one_error(tmp_path, config, "run")
    assert expected in message and "{export}" in message  # the fix


def test_a_table_export_on_a_shared_destination_is_refused_naming_it_and_the_fix(tmp_path):
    config = _write(tmp_path, [{**_EXPORT, "name": "one", "table_format": "delta",
                                "destination": {"type": "local", "path": "out"}},
                               {**_EXPORT, "name": "two", "destination": {"type": "local", "path": "out"}}])
    message = _one_error(tmp_path, config, "run")
    assert "'one' commits a delta table there" in message and "path: out/{export}" in message
    assert message.count("write to the same destination") == 1  # one message for the pair
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("first", "second"), [
    ({"type": "local", "path": "out/{export}"}, {"type": "local", "path": "out/{export}"}),
    ({"type": "local", "path": "out/one"}, {"type": "local", "path": "out/one2"}),
    ({"type": "s3", "bucket": "b", "prefix": "raw/"}, {"type": "s3", "bucket": "c", "prefix": "raw/"}),
    ({"type": "s3", "bucket": "b", "prefix": "x/{export}/{date}/"},
     {"type": "s3", "bucket": "b", "prefix": "x/{export}/{date}/"}),
    ({"type": "stdout"}, {"type": "stdout"}),
])
def test_separate_destinations_load(tmp_path, first, second):
    from rivet_core.config import load_config

    config = _write(tmp_path, [{**_EXPORT, "name": "one", "destination": first},
                               {**_EXPORT, "name": "two", "destination": second}])
    assert [e.name for e in load_config(config).exports] == ["one", "two"]


def _every_bound() -> list[tuple[str, str, float]]:
    from rivet_core.config.limits import PARQUET_BOUNDS, RETENTION_BOUNDS, WEBHOOK_BOUNDS

    out = [("tuning", f, hi) for f, (_, hi) in TUNING_BOUNDS.items()]
    out += [("export", f, hi) for f, (_, hi) in EXPORT_BOUNDS.items()]
    out += [("quality", f, hi) for f, (_, hi) in QUALITY_BOUNDS.items()]
    out += [("parquet", f, hi) for f, (_, hi) in PARQUET_BOUNDS.items()]
    out += [("webhook", f, hi) for f, (_, hi) in WEBHOOK_BOUNDS.items()]
    out += [("retention", f, hi) for f, (_, hi) in RETENTION_BOUNDS.items()]
    return out


@pytest.mark.parametrize(("block", "field", "limit"), _every_bound())
def test_every_ceiling_refuses_one_more_and_accepts_the_limit(tmp_path, block, field, limit):
    from rivet_core.config import load_config
    from rivet_core.errors import ConfigError

    def config(value: float) -> Path:
        export: dict = {**_EXPORT, "mode": "chunked", "chunk_column": "id"}
        top: dict = {}
        if block == "tuning":
            export["tuning"] = {field: value}
        elif block == "export":
            export[field] = value
        elif block in ("quality", "parquet"):
            export[block] = {field: value}
        elif block == "retention":  # a keep rule is required beside the field under test
            export[block] = {"keep_runs": 1, field: value}
        else:
            top = {"notifications": {"webhook": {"url": "http://127.0.0.1:9/h", field: value}}}
        path = _write(tmp_path, [export])
        data = yaml.safe_load(path.read_text())
        path.write_text(yaml.safe_dump({**data, **top}, sort_keys=False))
        return path

    over = limit + (1 if isinstance(limit, int) else 0.5)
    with pytest.raises(ConfigError) as info:
        load_config(config(over))
    assert f"`{field}` at " in info.value.message and f"must be <= {limit}" in info.value.message
    try:
        load_config(config(limit))
    except ConfigError as exc:  # other rules may object to the combination; never the ceiling
        assert f"`{field}` at " not in exc.message or "must be <=" not in exc.message
