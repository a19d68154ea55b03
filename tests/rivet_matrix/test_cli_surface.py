"""CLI surface Rivet has, checked on its own (issue 35 item 3): `run --summary-output`,
`run --parallel-exports`, `apply` of a plan file Rivet wrote, `state progression`,
`schema config`. Real PostgreSQL, the real `rivet` command; the destination is re-read with
pyarrow (tests/helpers.py `manifest_ids`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from tests.helpers import db_exec, manifest_ids, rivet, rivet_quick, source_block, write_config

ROWS = 30


@pytest.fixture(autouse=True)
def _sqlite_state_beside_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIVET_STATE_URL", raising=False)


@pytest.fixture
def audit(pg_url: str) -> str:
    """Rivet's matrix table: pa_audit(id 1..30, name)."""
    db_exec(pg_url, "CREATE TABLE pa_audit (id INT PRIMARY KEY, name TEXT)",
            "INSERT INTO pa_audit SELECT i, 'row_' || i FROM generate_series(1, 30) i")
    return pg_url


def _export(name: str, **fields: object) -> dict[str, object]:
    return {"name": name, "query": "SELECT id, name FROM pa_audit", "mode": "full", "format": "parquet",
            "destination": {"type": "local", "path": f"out/{name}"}, **fields}


@pytest.mark.postgres
def test_summary_output_writes_the_run_document_to_the_file(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [_export("pa_audit")])
    target = tmp_path / "reports" / "agg.json"
    result = rivet_quick("run", "-c", str(config), "--summary-output", str(target))
    assert result.returncode == 0, result.stderr
    document = json.loads(target.read_text())
    [run] = document["runs"]
    assert (run["export_name"], run["status"], run["rows"]) == ("pa_audit", "success", ROWS)
    assert manifest_ids(tmp_path / "out" / "pa_audit") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_parallel_exports_runs_one_export_and_refuses_several_before_anything_runs(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [_export("a"), _export("b")])
    single = rivet_quick("run", "-c", str(config), "-e", "a", "--parallel-exports")
    assert single.returncode == 0, single.stderr
    assert manifest_ids(tmp_path / "out" / "a") == list(range(1, ROWS + 1))

    several = rivet_quick("run", "-c", str(config), "--parallel-exports")
    assert several.returncode == 1, several.stderr
    assert "--parallel-exports: 2 exports selected" in several.stderr
    assert not (tmp_path / "out" / "b").exists()  # refused before anything ran


def _rivet_plan(tmp: Path, created: datetime) -> Path:
    """A plan as Rivet 0.7.5 wrote it (the fields of its artifact), naming a config that is gone."""
    plan = tmp / "plans" / "pa_audit.json"
    plan.parent.mkdir()
    plan.write_text(json.dumps({
        "rivet_version": "0.7.5", "plan_id": "bdeac0abe51a8ec0050d194d540b7a75",
        "created_at": created.isoformat().replace("+00:00", "Z"), "export_name": "pa_audit", "strategy": "full",
        "resolved_plan": {"export_name": "pa_audit", "base_query": "SELECT id, name FROM pa_audit",
                          "strategy": "Snapshot", "format": "parquet", "compression": "zstd",
                          "destination": {"type": "local", "path": "./out/pg_full", "bucket": None},
                          "source": {"type": "postgres", "url": None, "url_env": "PG_URL"}},
        "computed": {"chunk_ranges": [], "chunk_count": 0, "cursor_snapshot": None, "row_estimate": 30},
        "config_path": "/nonexistent/rivet/dev/cli_matrix/cfg/pg/pg_full.yaml"}))
    return plan


@pytest.mark.postgres
def test_apply_replays_a_plan_rivet_wrote_whose_config_is_gone(tmp_path, audit):
    plan = _rivet_plan(tmp_path, datetime.now(UTC) - timedelta(hours=1))
    applied = rivet("apply", str(plan), env={"PG_URL": audit}, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert manifest_ids(tmp_path / "out" / "pg_full") == list(range(1, ROWS + 1))
    assert (tmp_path / "plans" / ".rivet_state.db").exists()  # Rivet's fallback: state beside the plan


@pytest.mark.postgres
def test_apply_refuses_a_day_old_rivet_plan_without_force(tmp_path, audit):
    plan = _rivet_plan(tmp_path, datetime.now(UTC) - timedelta(days=3))
    refused = rivet("apply", str(plan), env={"PG_URL": audit}, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert "3 days old" in refused.stderr and "pass --force" in refused.stderr
    assert not (tmp_path / "out").exists()
    forced = rivet("apply", "--force", str(plan), env={"PG_URL": audit}, cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert manifest_ids(tmp_path / "out" / "pg_full") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_state_progression_shows_the_boundary_a_run_committed(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [_export("pa_audit", mode="incremental",
                                                                  cursor_column="id")])
    before = rivet_quick("state", "progression", "-c", str(config))
    assert before.returncode == 0 and "pa_audit: no progression recorded yet" in before.stdout
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    shown = rivet_quick("state", "progression", "-c", str(config), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["pa_audit"]["last_committed_cursor"] == str(ROWS)


def test_schema_config_prints_the_json_schema_the_loader_enforces():
    result = rivet_quick("schema", "config")
    assert result.returncode == 0, result.stderr
    schema = json.loads(result.stdout)
    assert schema["additionalProperties"] is False
    assert {"source", "exports"} <= set(schema["properties"])


@pytest.mark.postgres
def test_validate_output_writes_the_json_verdicts_to_the_file(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [_export("pa_audit")])
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    report = tmp_path / "reports" / "validate.json"
    result = rivet_quick("validate", "-c", str(config), "--format", "json", "-o", str(report))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"Validation report written to: {report}"
    [verdict] = json.loads(report.read_text())["exports"]
    assert verdict["export_name"] == "pa_audit" and verdict["verification"]["passed"] is True


@pytest.mark.postgres
def test_reconcile_and_repair_output_write_their_json_reports(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [_export(
        "pa_audit", mode="chunked", chunk_column="id", chunk_size=10, chunk_checkpoint=True)])
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    db_exec(audit, "DELETE FROM pa_audit WHERE id = 15")
    report = tmp_path / "reconcile.json"
    found = rivet_quick("reconcile", "-c", str(config), "-e", "pa_audit", "--format", "json", "-o", str(report))
    assert found.returncode == 3, found.stderr
    assert "Reconcile report written to:" in found.stdout
    assert json.loads(report.read_text())["summary"]["mismatches"] == 1
    planned = tmp_path / "repair.json"
    dry = rivet_quick("repair", "-c", str(config), "-e", "pa_audit", "-o", str(planned))
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(planned.read_text())
    assert plan["executed"] is False and [a["chunk_index"] for a in plan["plan"]["actions"]] == [1]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completions_prints_a_script_for_the_shell(shell):
    result = rivet_quick("completions", shell)
    assert result.returncode == 0, result.stderr
    assert "_RIVET_COMPLETE" in result.stdout


def _current_ids(prefix: Path) -> list[int]:
    """The ids in the parts the current manifest.json lists, re-read with pyarrow (a repair
    quarantines the parts it replaced, which the first run's copy still lists)."""
    import pyarrow.parquet as pq

    parts = json.loads((prefix / "manifest.json").read_text())["parts"]
    return sorted(i for part in parts for i in pq.read_table(prefix / part["path"]).column("id").to_pylist())


def _chunked_audit(tmp_path: Path, audit: str) -> Path:
    return write_config(tmp_path, source_block(audit), [_export(
        "pa_audit", mode="chunked", chunk_column="id", chunk_size=10, chunk_checkpoint=True)])


@pytest.mark.postgres
def test_repair_report_re_exports_the_chunks_a_saved_reconcile_report_names_without_recounting(tmp_path, audit):
    config = _chunked_audit(tmp_path, audit)
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    db_exec(audit, "DELETE FROM pa_audit WHERE id = 15")
    report = tmp_path / "reconcile.json"
    assert rivet_quick("reconcile", "-c", str(config), "-e", "pa_audit", "--format", "json",
                       "-o", str(report)).returncode == 3
    db_exec(audit, "DELETE FROM pa_audit WHERE id = 25")  # after the report: a recount would see it

    planned = rivet_quick("repair", "-c", str(config), "-e", "pa_audit", "--report", str(report),
                          "--format", "json")
    assert planned.returncode == 0, planned.stderr
    assert [a["chunk_index"] for a in json.loads(planned.stdout)["plan"]["actions"]] == [1]

    repaired = rivet_quick("repair", "-c", str(config), "-e", "pa_audit", "--report", str(report), "--execute")
    assert repaired.returncode == 0, repaired.stderr
    # chunk 1 re-read from the source (15 gone); chunk 2, which the report did not name, untouched (25 kept)
    assert _current_ids(tmp_path / "out" / "pa_audit") == [i for i in range(1, ROWS + 1) if i != 15]
    verdict = rivet_quick("validate", "-c", str(config), "-e", "pa_audit", "--depth", "full")
    assert verdict.returncode == 0 and "PASSED" in verdict.stdout, verdict.stdout + verdict.stderr


@pytest.mark.postgres
def test_repair_report_for_another_export_or_an_older_chunk_run_is_refused_and_nothing_is_exported(
        tmp_path, audit):
    config = _chunked_audit(tmp_path, audit)
    assert rivet_quick("run", "-c", str(config)).returncode == 0
    db_exec(audit, "DELETE FROM pa_audit WHERE id = 15")
    report = tmp_path / "reconcile.json"
    rivet_quick("reconcile", "-c", str(config), "-e", "pa_audit", "--format", "json", "-o", str(report))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(report.read_text()), "export_name": "orders"}))
    out = tmp_path / "out" / "pa_audit"
    before = sorted((p.name, p.read_bytes()) for p in out.rglob("*") if p.is_file())

    foreign = rivet_quick("repair", "-c", str(config), "-e", "pa_audit", "--report", str(other), "--execute")
    assert foreign.returncode == 1
    assert "repair: reconcile report is for export 'orders' but config targets 'pa_audit'" in foreign.stderr

    assert rivet_quick("run", "-c", str(config)).returncode == 0  # a newer chunk run
    after_run = sorted((p.name, p.read_bytes()) for p in out.rglob("*") if p.is_file())
    stale = rivet_quick("repair", "-c", str(config), "-e", "pa_audit", "--report", str(report), "--execute")
    assert stale.returncode == 1
    assert f"reconcile report '{report}' is for chunk run" in stale.stderr
    assert "re-run `rivet reconcile -e pa_audit --format json" in stale.stderr
    assert sorted((p.name, p.read_bytes()) for p in out.rglob("*") if p.is_file()) == after_run != before


def test_state_loads_says_the_load_ledger_is_empty_in_rivets_words(tmp_path):
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"},
                          [_export("pa_audit")])
    shown = rivet_quick("state", "loads", "-c", str(config))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "no loads recorded in the state DB yet\n"
    assert "no `rivet load`" in shown.stderr
    targeted = rivet_quick("state", "loads", "-c", str(config), "--target", "proj.ds.t")
    assert targeted.stdout == "no loads match --target 'proj.ds.t'\n"
    assert rivet_quick("state", "loads", "-c", str(config), "--last", "0").stdout == ""


def _with_password(url: str, password: str) -> str:
    """The test PostgreSQL trusts local connections, so any password is accepted — which lets
    the test prove a password on the command line never reaches the scaffold."""
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:{password}@{parts.hostname}:{parts.port}"))


@pytest.mark.postgres
def test_init_source_and_source_file_scaffold_a_config_that_runs_without_writing_the_url(tmp_path, audit):
    secret = _with_password(audit, "s3cret-Pw-35")
    inline = tmp_path / "inline.yaml"
    made = rivet_quick("init", "--source", secret, "--table", "pa_audit", "-o", str(inline))
    assert made.returncode == 0, made.stderr
    assert "url_env: DATABASE_URL" in inline.read_text() and "s3cret-Pw-35" not in inline.read_text()
    assert rivet_quick("run", "-c", str(inline), env={"DATABASE_URL": secret}).returncode == 0
    assert manifest_ids(tmp_path / "output" / "pa_audit") == list(range(1, ROWS + 1))

    url_file = tmp_path / "secrets" / "pg.url"
    url_file.parent.mkdir()
    url_file.write_text(secret + "\n")
    from_file = tmp_path / "from_file" / "rivet.yaml"
    made = rivet_quick("init", "--source-file", str(url_file), "--table", "pa_audit", "-o", str(from_file))
    assert made.returncode == 0, made.stderr
    text = from_file.read_text()
    assert f"url_file: {url_file}" in text and "s3cret-Pw-35" not in text
    assert rivet_quick("run", "-c", str(from_file)).returncode == 0
    assert manifest_ids(from_file.parent / "output" / "pa_audit") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_init_mode_forces_the_mode_on_every_export_or_refuses_a_table_without_its_key(tmp_path, audit):
    env = {"PG_URL": audit}
    config = tmp_path / "rivet.yaml"
    made = rivet_quick("init", "--source-env", "PG_URL", "--table", "pa_audit", "--mode", "chunked",
                       "--chunk-size", "10", "-o", str(config), env=env)
    assert made.returncode == 0, made.stderr
    [export] = yaml.safe_load(config.read_text())["exports"]  # 30 rows: full, unless forced
    assert (export["mode"], export["chunk_column"], export["chunk_size"]) == ("chunked", "id", 10)
    assert rivet_quick("run", "-c", str(config), env=env).returncode == 0
    assert manifest_ids(tmp_path / "output" / "pa_audit") == list(range(1, ROWS + 1))

    keyless = rivet_quick("init", "--source-env", "PG_URL", "--table", "pa_audit", "--mode", "time_window",
                          "-o", str(tmp_path / "tw.yaml"), env=env)
    assert keyless.returncode == 1
    assert "--mode time_window: table 'pa_audit' has no date or timestamp column" in keyless.stderr
    unknown = rivet_quick("init", "--source-env", "PG_URL", "--mode", "stream", "-o", str(tmp_path / "x.yaml"),
                          env=env)
    assert unknown.returncode == 1
    assert '--mode must be one of: full, incremental, chunked, time_window, cdc (got "stream")' in unknown.stderr
    cdc = rivet_quick("init", "--source-env", "PG_URL", "--mode", "cdc", "-o", str(tmp_path / "c.yaml"), env=env)
    assert cdc.returncode == 1 and "--mode cdc" in cdc.stderr and "batch exports only" in cdc.stderr
    assert not any((tmp_path / n).exists() for n in ("tw.yaml", "x.yaml", "c.yaml"))


@pytest.mark.postgres
def test_init_discover_prints_rivets_discovery_artifact_for_each_table(tmp_path, audit):
    db_exec(audit, "CREATE TABLE events (id BIGINT PRIMARY KEY, updated_at TIMESTAMP NOT NULL)")
    found = rivet_quick("init", "--source-env", "PG_URL", "--discover", env={"PG_URL": audit})
    assert found.returncode == 0, found.stderr
    artifact = json.loads(found.stdout)
    assert artifact["source_type"] == "postgres" and {"rivet_version", "scope"} <= set(artifact)
    tables = {t["table"]: t for t in artifact["tables"]}
    assert set(tables) == {"pa_audit", "events"}
    assert tables["pa_audit"]["row_estimate"] >= 0 and tables["pa_audit"]["suggested_mode"] == "full"
    assert tables["pa_audit"]["chunk_candidates"][0] == {"column": "id", "data_type": "integer",
                                                          "is_primary_key": True, "score": 100}
    [cursor] = [c for c in tables["events"]["cursor_candidates"] if c["column"] == "updated_at"]
    assert "timestamp_type" in cursor["reasons"] and cursor["is_nullable"] is False
    assert not (tmp_path / "rivet.yaml").exists()


@pytest.mark.parametrize(("args", "says"), [
    ((), "the following required arguments were not provided"),
    (("--source", "postgresql://u@h/db", "--source-env", "X"), "cannot be used with '--source-env'"),
    (("--source-env", "X", "--discover", "--s3-bucket", "b"), "'--discover' cannot be used with '--s3-bucket'"),
    (("--source-env", "X", "--gcs-bucket", "g", "--s3-bucket", "b"), "'--gcs-bucket' cannot be used with"),
])
def test_init_flag_combinations_rivet_refuses_are_usage_errors(args, says):
    refused = rivet_quick("init", *args)
    assert refused.returncode == 2, refused.stderr
    assert says in refused.stderr


def _ran(stderr: str) -> list[str]:
    """The exports whose run summary (`export <name>: STATUS`) stderr shows, in order."""
    return [line.split()[1].rstrip(":") for line in stderr.splitlines() if line.startswith("export ")]


@pytest.mark.postgres
def test_apply_a_config_runs_its_exports_wave_by_wave_and_resume_skips_the_completed_ones(tmp_path, audit):
    config = write_config(tmp_path, source_block(audit), [
        _export("late", wave=2), _export("unscheduled"), _export("early", wave=1)])
    applied = rivet_quick("apply", str(config))
    assert applied.returncode == 0, applied.stderr
    assert _ran(applied.stderr) == ["early", "late", "unscheduled"]  # ascending wave, no wave last
    assert "── wave 1 · 1 export(s) ──" in applied.stderr and "── wave unscheduled · 1 export(s) ──" in applied.stderr
    for name in ("early", "late", "unscheduled"):
        assert manifest_ids(tmp_path / "out" / name) == list(range(1, ROWS + 1))

    (tmp_path / "out" / "late" / "_SUCCESS").unlink()  # as if its run had died before the marker
    before = {n: (tmp_path / "out" / n / "manifest.json").read_bytes() for n in ("early", "unscheduled")}
    resumed = rivet_quick("apply", str(config), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert "apply: skipping 'early' — destination already complete (_SUCCESS)" in resumed.stderr
    assert "apply: skipping 'unscheduled'" in resumed.stderr
    assert _ran(resumed.stderr) == ["late"]
    assert {n: (tmp_path / "out" / n / "manifest.json").read_bytes() for n in before} == before
    assert (tmp_path / "out" / "late" / "_SUCCESS").exists()
    assert _current_ids(tmp_path / "out" / "late") == list(range(1, ROWS + 1))


def test_apply_pool_is_refused_with_the_reason_and_split_needs_pool(tmp_path):
    config = write_config(tmp_path, {"type": "postgres", "url": "postgresql://u@127.0.0.1:1/db"},
                          [_export("a"), _export("b")])
    pooled = rivet_quick("apply", str(config), "--pool", "2")
    assert pooled.returncode == 1
    assert "--pool runs a config's exports as a pool of concurrent exports" in pooled.stderr
    assert "drop --pool" in pooled.stderr
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    assert "does not apply to a sealed single-export plan artifact" in rivet_quick(
        "apply", str(plan), "--pool", "2").stderr
    split = rivet_quick("apply", str(config), "--split")
    assert split.returncode == 2 and "'--split' requires '--pool <N>'" in split.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.postgres
def test_plan_annotate_waves_writes_each_exports_wave_into_the_config_and_apply_runs_them_in_that_order(
        tmp_path, audit):
    db_exec(audit, "CREATE TABLE big (id INT PRIMARY KEY, name TEXT)",
            "INSERT INTO big SELECT g, 'n' || g FROM generate_series(1, 150000) AS g", "ANALYZE big")
    config = tmp_path / "rivet.yaml"
    config.write_text(f"""# hand-written: this comment must survive
source:
  type: postgres
  url: {audit}
exports:
  - name: heavy   # 150 000 rows
    table: big
    wave: 7
    format: parquet
    destination: {{type: local, path: out/heavy}}
  - name: "light"
    query: SELECT id, name FROM pa_audit
    format: parquet
    destination: {{type: local, path: out/light}}
""")
    before = config.read_bytes()
    assert rivet_quick("plan", "-c", str(config)).returncode == 0
    assert config.read_bytes() == before  # read-only without the flag

    scoped = rivet_quick("plan", "-c", str(config), "-e", "light", "--annotate-waves")
    assert scoped.returncode == 1 and "cannot be scoped to --export" in scoped.stderr
    assert config.read_bytes() == before

    annotated = rivet_quick("plan", "-c", str(config), "--annotate-waves")
    assert annotated.returncode == 0, annotated.stderr
    assert "(over)wrote wave/parallel_safe on 2 export(s)" in annotated.stderr
    text = config.read_text()
    assert text.startswith("# hand-written: this comment must survive") and "# 150 000 rows" in text
    exports = {e["name"]: e for e in yaml.safe_load(text)["exports"]}
    assert (exports["light"]["wave"], exports["light"]["parallel_safe"]) == (1, True)
    assert (exports["heavy"]["wave"], exports["heavy"]["parallel_safe"]) == (2, False)

    applied = rivet_quick("apply", str(config))
    assert applied.returncode == 0, applied.stderr
    assert _ran(applied.stderr) == ["light", "heavy"]
    assert _current_ids(tmp_path / "out" / "light") == list(range(1, ROWS + 1))


@pytest.mark.postgres
def test_init_tls_connects_as_asked_and_writes_the_same_posture_into_the_scaffold(tmp_path, audit):
    env = {"PG_URL": audit}
    config = tmp_path / "rivet.yaml"
    made = rivet_quick("init", "--source-env", "PG_URL", "--table", "pa_audit", "--tls", "disable", "-o",
                       str(config), env=env)
    assert made.returncode == 0, made.stderr
    assert yaml.safe_load(config.read_text())["source"]["tls"] == {"mode": "disable"}
    assert rivet_quick("run", "-c", str(config), env=env).returncode == 0
    assert manifest_ids(tmp_path / "output" / "pa_audit") == list(range(1, ROWS + 1))
    discovered = rivet_quick("init", "--source-env", "PG_URL", "--discover", "--tls", "disable", env=env)
    assert json.loads(discovered.stdout)["tls_mode"] == "disable"

    required = rivet_quick("init", "--source-env", "PG_URL", "--tls", "require", "-o", str(tmp_path / "q.yaml"),
                           env=env)  # the test server offers no TLS: init's own connection asked for it
    assert required.returncode == 1 and "SSL was required" in required.stderr
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    meaningless = rivet_quick("init", "--source-env", "PG_URL", "--tls", "require", "--tls-ca", str(ca),
                              "-o", str(tmp_path / "r.yaml"), env=env)
    assert meaningless.returncode == 1
    assert "--tls-ca is meaningless with `--tls require`" in meaningless.stderr
    orphan = rivet_quick("init", "--source-env", "PG_URL", "--tls-ca", str(ca), env=env)
    assert orphan.returncode == 2 and "'--tls-ca <PATH>' requires '--tls <MODE>'" in orphan.stderr
    assert not (tmp_path / "r.yaml").exists() and not (tmp_path / "q.yaml").exists()
