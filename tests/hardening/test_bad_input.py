"""Hostile input: fuzzed configs, hostile identifiers and cursor values, path traversal, and
damaged trust artifacts (huge, truncated, malformed manifest.json / _SUCCESS).

The promise under test: whatever the input, rivet answers with ONE clean error (the
project's `ConfigError`/exit 1 for a config, a verdict for a damaged destination) and never
a traceback; SQL identifiers and cursor values stay data, never SQL; no key ever leaves the
destination root.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core.config import load_config
from rivet_core.errors import ConfigError
from tests.helpers import (
    data_files,
    db_exec,
    manifest_table,
    rivet,
    rivet_in_process,
    source_block,
    success_manifests,
    write_config,
)

# ======================================================================= 1. config fuzzing
_BASE_EXPORT = ("  - name: items\n    table: items\n    format: parquet\n"
                "    destination: {type: local, path: out}\n")
_BASE = "source: {type: sqlite, url: 'sqlite:///src.db'}\nexports:\n" + _BASE_EXPORT

_KEYS = ["source", "exports", "name", "table", "query", "format", "mode", "destination", "type",
         "path", "prefix", "bucket", "cursor_column", "max_file_size", "tuning", "batch_size",
         "notifications", "on", "quality", "row_count_min", "compression", "chunk_size", "url",
         "ключ", "名前", "\u202eevil", "x" * 300]


def _nest(depth: int, flow: str) -> str:
    if flow == "list":
        return "[" * depth + "]" * depth
    return "{a: " * depth + "1" + "}" * depth


def _hostile_value(rnd: random.Random | None, draw: Any = None) -> str:
    """One hostile YAML value text. `draw` (hypothesis) or `rnd` (seeded) picks it."""
    pick = draw if draw is not None else (lambda options: rnd.choice(options))  # type: ignore[union-attr]
    kind = pick(["nest_list", "nest_map", "alias_bomb", "tag", "huge_int", "huge_float", "unicode",
                 "escape", "undefined_alias", "block", "empty", "bool_like", "directive"])
    n = pick([1, 5, 40, 300])  # ≥ ~300 is "too deep" already; the catalogue has 1500
    return {
        "nest_list": _nest(n, "list"),
        "nest_map": _nest(min(n, 1000), "map"),
        "alias_bomb": "&a [lol, lol, lol]\nbomb: [*a, *a, *a, *a, *a, *a, *a, *a]",
        "tag": pick(["!!python/object/apply:os.system ['echo pwned']", "!!python/name:os.system",
                     "!!binary aGVsbG8=", "!custom {x: 1}", "!!int 'nope'", "!!set {a, b}",
                     "!!timestamp 2001-12-14", "!!float 'x'", "!!omap [a: 1]"]),
        "huge_int": "9" * pick([20, 400, 4400, 9000]),
        "huge_float": pick(["1e99999", "-1e-99999", ".nan", "-.inf", "1_000_000e1000"]),
        "unicode": json.dumps(pick(["\u202e\u200b\ufeff", "日本語テキスト", "😀" * 50, "\\ud800",
                                    "a\u0000b", "ż" * 5000]), ensure_ascii=False),
        "escape": pick(['"\\x00\\x1b[31m"', '"\\uD800"', "'it''s'", '"\\\\\\\\"', '"%s%%${x}"']),
        "undefined_alias": "*nowhere",
        "block": pick(["|\n   deeply\n indented", ">-\n\tx", "|+\n\n\n"]),
        "empty": pick(["", "~", "null", "[]", "{}"]),
        "bool_like": pick(["yes", "no", "on", "off", "True", "0x1F", "0o17", "010"]),
        "directive": pick(["\n---\nsecond: doc", "\n...\n", "\n%YAML 1.1\n---\n"]),
    }[kind]


@st.composite
def hostile_configs(draw: Any) -> str:
    """A valid config with hostile keys/values spliced in at the top level, in `source:` or
    in the export, plus document-level noise (BOM, CRLF, anchors)."""
    lines = _BASE.splitlines()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        key = draw(st.sampled_from(_KEYS))
        value = _hostile_value(None, lambda options: draw(st.sampled_from(options)))
        where = draw(st.sampled_from(["top", "export"]))
        entry = f"{key}: {value}" if where == "top" else f"    {key}: {value}"
        lines.insert(len(lines) if where == "top" else 3, entry)
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text = "\ufeff" + text
    if draw(st.booleans()):
        text = text.replace("\n", "\r\n")
    if draw(st.booleans()):
        text += f"anchor: &x {draw(st.text(max_size=30))!r}\nalias: *x\n"
    return text


def _load_only_config_error(text: str, tmp: Path) -> ConfigError | None:
    path = tmp / "rivet.yaml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    started = time.monotonic()
    try:
        load_config(path)
    except ConfigError as exc:
        assert exc.exit_code == 1
        message = str(exc)
        assert message.strip() and "Traceback" not in message and "pydantic" not in message.lower()
        return exc
    finally:
        assert time.monotonic() - started < 20, "a hostile config must be refused quickly"
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_configs())
def test_hostile_yaml_documents_only_ever_raise_config_error(text):
    with tempfile.TemporaryDirectory() as tmp:
        _load_only_config_error(text, Path(tmp))


_CATALOGUE: dict[str, bytes] = {
    "deep_list": ("x: " + _nest(1500, "list")).encode(),
    "deep_map": ("x: " + _nest(3000, "map")).encode(),
    "deep_block": "".join("  " * i + f"k{i}:\n" for i in range(500)).encode(),
    "alias_bomb": ("a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
        + "source: {type: sqlite, url: 'sqlite:///x.db'}\nexports: *i\n").encode(),
    "python_tag": (_BASE + "x: !!python/object/apply:os.system ['touch PWNED']\n").encode(),
    "huge_int": _BASE.replace("format: parquet", "format: parquet\n    chunk_size: " + "9" * 9000).encode(),
    "huge_value_over_cap": _BASE.replace("table: items", "table: '" + "x" * (5 * 1024 * 1024) + "'").encode(),
    "invalid_utf8": _BASE.encode() + b"\xff\xfe\x80",
    "nul_byte": _BASE.encode() + b"\x00",
    "only_bom": "\ufeff".encode(),
    "a_list": b"- 1\n- 2\n",
    "wrong_types": _BASE.replace("table: items", "table: [1, 2]").replace("format: parquet",
                                                                          "format: {a: 1}").encode(),
}


@pytest.mark.parametrize("case", list(_CATALOGUE))
def test_a_catalogue_of_hostile_configs_gets_one_clean_config_error(tmp_path, case):
    path = tmp_path / "rivet.yaml"
    path.write_bytes(_CATALOGUE[case])
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert time.monotonic() - started < 20
    assert caught.value.exit_code == 1 and "Traceback" not in str(caught.value)
    assert not (tmp_path / "PWNED").exists()  # the python tag was refused, never constructed
    if case == "huge_value_over_cap":
        assert "over the 4 MiB limit" in str(caught.value)


@pytest.mark.parametrize("command", ["validate", "run"])
def test_the_cli_answers_generated_hostile_configs_with_one_error_line(tmp_path, command):
    """The binary itself, in a subprocess: exit 1, `Error: …` on stderr, never a traceback."""
    rnd = random.Random(7 if command == "validate" else 11)
    texts = [_BASE + f"{rnd.choice(_KEYS)}: {_hostile_value(rnd)}\n",
             _CATALOGUE["deep_list" if command == "validate" else "alias_bomb"].decode()]
    for i, text in enumerate(texts):
        path = tmp_path / f"c{i}" / "rivet.yaml"
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        proc = rivet(command, "-c", str(path))
        assert proc.returncode == 1, (text[:200], proc.stderr)
        assert "Traceback" not in proc.stderr and "Error: " in proc.stderr, proc.stderr
        assert not data_files(path.parent)


# =================================================================== 2. path traversal
@pytest.mark.parametrize("name", ["../escape", "a/../../b", "/abs", "a\\b", "a\x00b", "..", ".hidden", "a/b"])
def test_path_traversal_in_export_names_is_refused(tmp_path, name):
    cfg = yaml.safe_load(_BASE)
    cfg["exports"][0]["name"] = name
    with pytest.raises(ConfigError, match="not filename-safe"):
        _load_dict(tmp_path, cfg)


@pytest.mark.parametrize(("destination", "message"), [
    ({"type": "s3", "prefix": "../escape/"}, "unsafe destination key"),
    ({"type": "s3", "prefix": "exports/../../x/"}, "unsafe destination key"),
    ({"type": "s3", "prefix": "a\\b/"}, "unsafe destination key"),
    ({"type": "s3", "prefix": "a//b/"}, "unsafe destination key"),
    ({"type": "s3", "prefix": "./x/"}, "unsafe destination key"),
    ({"type": "s3", "prefix": "a\x00b/"}, "destination.prefix contains a NUL character"),
    ({"type": "s3", "bucket": "../b"}, "S3 bucket name '../b' is invalid"),
    ({"type": "local", "path": "out\x00x"}, "destination.path contains a NUL character"),
    ({"type": "local", "path": "../../up"}, "must not contain a '..' component"),
])
def test_path_traversal_in_a_destination_is_refused_before_anything_is_written(tmp_path, destination, message):
    cfg = yaml.safe_load(_BASE)
    cfg["exports"][0]["destination"] = {"bucket": "b", "endpoint": "http://127.0.0.1:9", **destination} \
        if destination["type"] == "s3" else destination
    path = tmp_path / "rivet.yaml"
    path.write_text(yaml.safe_dump(cfg))
    result = rivet_in_process("run", "-c", str(path))
    assert result.exit_code == 1, result.output
    assert message in result.stderr and "Traceback" not in result.output, result.output
    assert "ValueError" not in result.stderr  # one of ours, not a stray OS error
    # Nothing written but the config and the state store: no data directory, here or above.
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".rivet")) == ["rivet.yaml"]
    assert not (tmp_path.parent.parent / "up").exists()


def _load_dict(tmp: Path, cfg: dict[str, Any]) -> Any:
    path = tmp / "rivet.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_config(path)


def test_manifest_part_paths_that_escape_the_root_are_never_followed(tmp_path):
    """A tampered manifest naming `../outside.parquet` or `/etc/passwd`: validate reports the
    part missing (it is not under the root), and nothing outside the root is read or moved."""
    config, out = _good_local_run(tmp_path)
    outside = tmp_path / "outside.parquet"
    outside.write_bytes(b"PAR1 not yours")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["parts"][0]["path"] = "../outside.parquet"
    manifest["parts"].append({**manifest["parts"][0], "part_id": 2, "path": "/etc/passwd"})
    (out / "manifest.json").write_text(json.dumps(manifest))
    result = rivet_in_process("validate", "-c", str(config), "--format", "json")
    verdict = json.loads(result.stdout)["exports"][0]["verification"]
    assert result.exit_code == 3
    missing = sorted(f["path"] for f in verdict["failures"] if f["kind"] == "part_missing")
    assert missing == ["../outside.parquet", "/etc/passwd"]
    assert outside.read_bytes() == b"PAR1 not yours"


# ==================================================== 3. hostile identifiers and cursor values
_HOSTILE_TABLE = "we\"ird'; DROP TABLE victims; --"
_ID = 'i"d`x'
_CURSOR = "cur;sor */ --%s"
_VALUE = "va'l\\ue"
_FIRST = ["a'; DROP TABLE victims; --", "b\\' OR 1=1 --", "c */ SELECT 1; /*", 'd "quoted" `tick`',
          "e ünï©ødé 😀", "f%s%%(x)s ${NAME}"]
_SECOND = ["g'); DELETE FROM victims; --", "h\\\\ backslashes \\"]


def _ident(engine: str, name: str) -> str:
    return '"' + name.replace('"', '""') + '"' if engine == "postgres" else "`" + name.replace("`", "``") + "`"


def _literal(engine: str, value: str) -> str:
    text = value.replace("'", "''")
    return f"'{text.replace(chr(92), chr(92) * 2)}'" if engine == "mysql" else f"'{text}'"


def _insert(url: str, engine: str, start: int, values: list[str]) -> None:
    rows = ", ".join(f"({start + i}, {_literal(engine, v)}, {_literal(engine, v[::-1])})"
                     for i, v in enumerate(values))
    db_exec(url, f"INSERT INTO {_ident(engine, _HOSTILE_TABLE)} VALUES {rows}")


@pytest.fixture(params=["postgres", "mysql"])
def hostile_source(request: pytest.FixtureRequest) -> tuple[str, str]:
    engine = request.param
    url = request.getfixturevalue("pg_url" if engine == "postgres" else "mysql_url")
    text_type = "TEXT" if engine == "postgres" else "VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    db_exec(url, "CREATE TABLE victims (id INT PRIMARY KEY)", "INSERT INTO victims VALUES (1), (2), (3)",
            f"CREATE TABLE {_ident(engine, _HOSTILE_TABLE)} ({_ident(engine, _ID)} INT PRIMARY KEY, "
            f"{_ident(engine, _CURSOR)} {text_type} NOT NULL, {_ident(engine, _VALUE)} {text_type})")
    _insert(url, engine, 1, _FIRST)
    return engine, url


def test_hostile_identifiers_and_cursor_values_stay_inert(tmp_path, hostile_source):
    engine, url = hostile_source
    query = f"SELECT * FROM {_ident(engine, _HOSTILE_TABLE)}"
    config = write_config(tmp_path, source_block(url), [{
        "name": "hostile", "query": query, "mode": "incremental", "cursor_column": _CURSOR,
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    first = rivet_in_process("run", "-c", str(config))
    assert first.exit_code == 0, first.output
    _insert(url, engine, 100, _SECOND)
    second = rivet_in_process("run", "-c", str(config), "--validate")
    assert second.exit_code == 0, second.output

    out = tmp_path / "out"
    got = manifest_table(out).sort_by(_ID)
    source = db_exec(url, f"SELECT {_ident(engine, _ID)}, {_ident(engine, _CURSOR)}, {_ident(engine, _VALUE)} "
                          f"FROM {_ident(engine, _HOSTILE_TABLE)} ORDER BY 1")
    assert got.column_names == [_ID, _CURSOR, _VALUE]  # the names themselves survive, byte for byte
    assert list(zip(*(got.column(c).to_pylist() for c in got.column_names), strict=True)) == \
        [tuple(r) for r in source]
    highs = sorted(m["source"]["extraction"]["cursor_high"] for m in success_manifests(out))
    assert highs == [_FIRST[-1], _SECOND[-1]]  # the hostile values were the cursor, as data
    assert db_exec(url, "SELECT COUNT(*) FROM victims") == [(3,)]  # no payload ever ran

    # `table:` is spliced unquoted by design, so it only accepts plain identifiers.
    (tmp_path / "p").mkdir()
    payload = write_config(tmp_path / "p", source_block(url), [{
        "name": "payload", "table": "victims; DROP TABLE victims", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}])
    refused = rivet_in_process("run", "-c", str(payload))
    assert refused.exit_code == 1 and "use query:" in refused.stderr, refused.output
    assert db_exec(url, "SELECT COUNT(*) FROM victims") == [(3,)]


# ============================================ 4. huge, truncated, malformed trust artifacts
def _good_local_run(tmp: Path) -> tuple[Path, Path]:
    import sqlite3

    db = tmp / "src.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 21)])
    config = write_config(tmp, source_block(f"sqlite:///{db}"), [{
        "name": "items", "table": "items", "mode": "incremental", "cursor_column": "id",
        "format": "parquet", "destination": {"type": "local", "path": "out"}}])
    result = rivet_in_process("run", "-c", str(config))
    assert result.exit_code == 0, result.output
    return config, tmp / "out"


def _damage(out: Path, case: str) -> None:
    manifest = (out / "manifest.json").read_bytes()
    parsed = json.loads(manifest)
    copy = next(p for p in out.glob("manifest-*.json"))
    writes: dict[str, tuple[Path, bytes]] = {
        "manifest_50mb": (out / "manifest.json",
                          b'{"parts": [' + b'{"path": "x.parquet", "rows": 1},' * 1_600_000 + b"{}]}"),
        "manifest_over_cap": (out / "manifest.json", b" " * (65 * 1024 * 1024)),
        "manifest_truncated": (out / "manifest.json", manifest[: len(manifest) // 2]),
        "manifest_empty": (out / "manifest.json", b""),
        "manifest_binary": (out / "manifest.json", bytes(range(256)) * 64),
        "manifest_deep_json": (out / "manifest.json", b"[" * 100_000 + b"]" * 100_000),
        "manifest_wrong_types": (out / "manifest.json",
                                 json.dumps({**parsed, "parts": "x", "row_count": -1}).encode()),
        "run_copy_50mb": (copy, b"{" + b" " * (50 * 1024 * 1024) + b"}"),
        "success_huge": (out / "_SUCCESS", b"xxh3:" + b"0" * (10 * 1024 * 1024)),
        "success_truncated": (out / "_SUCCESS", (out / "_SUCCESS").read_bytes()[:9]),
        "success_binary": (out / "_SUCCESS", b"\xff\x00\x1b[31m" * 50),
    }
    if case == "success_missing":  # a crash between manifest.json and _SUCCESS
        (out / "_SUCCESS").unlink()
        return
    target, body = writes[case]
    target.write_bytes(body)


_VERDICTS = {
    "manifest_50mb": ("manifest_self_inconsistent", 3), "manifest_over_cap": ("manifest_oversized", 3),
    "manifest_truncated": ("manifest_self_inconsistent", 3), "manifest_empty": ("manifest_self_inconsistent", 3),
    "manifest_binary": ("manifest_self_inconsistent", 3), "manifest_deep_json": ("manifest_self_inconsistent", 3),
    "manifest_wrong_types": ("manifest_self_inconsistent", 3), "run_copy_50mb": (None, 0),
    "success_huge": ("success_marker_malformed", 3), "success_truncated": ("success_marker_malformed", 3),
    "success_binary": ("success_marker_malformed", 3), "success_missing": ("success_marker_missing", 3),
}


@pytest.mark.parametrize("case", list(_VERDICTS))
def test_damaged_manifest_or_success_gets_a_verdict_and_the_next_run_recovers(tmp_path, case):
    config, out = _good_local_run(tmp_path)
    _damage(out, case)
    kind, code = _VERDICTS[case]
    check = rivet_in_process("validate", "-c", str(config), "--format", "json")
    assert check.exit_code == code, check.output
    verdict = json.loads(check.stdout)["exports"][0]["verification"]
    if kind is None:  # an unreadable sibling copy is skipped, not fatal
        assert verdict["passed"], verdict
    else:
        assert kind in [f["kind"] for f in verdict["failures"]], verdict

    import sqlite3

    with sqlite3.connect(tmp_path / "src.db") as conn:
        conn.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"v{i}") for i in range(21, 26)])
    rerun = rivet_in_process("run", "-c", str(config), "--validate")
    assert rerun.exit_code == 0, rerun.output
    assert "Traceback" not in rerun.output
    after = rivet_in_process("validate", "-c", str(config), "--format", "json")
    assert after.exit_code == 0, after.output
    # The recovery run's own manifest lists the new rows; every data file at the prefix
    # together holds each id exactly once (nothing re-exported, nothing lost).
    assert sorted(manifest_table_ids(out))[-5:] == [21, 22, 23, 24, 25]
    on_disk = sorted(i for p in data_files(out) for i in pq.read_table(p).column("id").to_pylist())
    assert on_disk == list(range(1, 26))


def manifest_table_ids(out: Path) -> list[int]:
    """Ids in the parts the (readable) success manifests list; damaged copies are skipped."""
    ids: list[int] = []
    seen: set[str] = set()
    for p in sorted(out.glob("manifest*.json")):
        try:
            m = json.loads(p.read_bytes())
        except (ValueError, RecursionError):
            continue
        if not isinstance(m, dict) or m.get("status") != "success" or not isinstance(m.get("parts"), list):
            continue
        for part in m["parts"]:
            if isinstance(part, dict) and part.get("path") not in seen and (out / str(part["path"])).is_file():
                seen.add(part["path"])
                ids.extend(pq.read_table(out / part["path"]).column("id").to_pylist())
    return ids

