"""Rivet's CLI matrix (its `dev/cli_matrix`: 88 cells, `expected_rc.txt`, `expected_msg.txt`)
run against this project's `rivet` on the real PostgreSQL and MariaDB servers.

The cells, their order (later cells read what earlier ones wrote: a plan file, a finished
run), the configs and the expected exit codes and message substrings are Rivet's, as facts;
the harness is ours. `run_matrix` runs every cell in a process of its own (some unset a
variable) and returns what each printed and exited with; `score` grades them.

Run it alone to print the pass counts (docs/rivet-compat.md "Rivet's CLI matrix"):

    python -m tests.rivet_matrix.cli_matrix            # this checkout's rivet
    RIVET_MATRIX_CODE=/path/to/checkout python -m tests.rivet_matrix.cli_matrix
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.helpers import db_exec

#: Rivet's dev/cli_matrix/cfg: name → (engine, export fields besides the shared ones).
CONFIGS: dict[str, tuple[str, dict[str, object]]] = {
    "pg_full": ("PG", {"mode": "full"}),
    "pg_incremental": ("PG", {"mode": "incremental", "cursor_column": "id"}),
    "pg_chunked": ("PG", {"wave": 3, "parallel_safe": True, "mode": "chunked", "chunk_column": "id",
                          "chunk_size": 10}),
    "pg_param": ("PG", {"mode": "full", "query": "SELECT id, name FROM pa_audit WHERE id <= ${max_id}"}),
    "my_full": ("MY", {"mode": "full"}),
    "my_incremental": ("MY", {"mode": "incremental", "cursor_column": "id"}),
    "my_chunked": ("MY", {"mode": "chunked", "chunk_column": "id", "chunk_size": 10}),
}
SHORT = {"PGC": "pg_full", "PGI": "pg_incremental", "PGK": "pg_chunked", "PGP": "pg_param",
         "MYC": "my_full", "MYI": "my_incremental", "MYK": "my_chunked"}

#: (cell, argv after `rivet`, Rivet's expected exit code), in Rivet's order. Tokens: PGC… a
#: config path, LM/… the log directory, UNSET the cell runs without PG_URL.
CELLS: list[tuple[str, str, int]] = [
    ("pg_doctor_ok", "doctor -c PGC", 0),
    ("my_doctor_ok", "doctor -c MYC", 0),
    ("pg_doctor_unset", "UNSET doctor -c PGC", 1),
    ("pg_check_full", "check -c PGC", 0),
    ("my_check_full", "check -c MYC", 0),
    ("pg_check_incr", "check -c PGI", 0),
    ("pg_check_chunked", "check -c PGK", 0),
    ("pg_check_unknown", "check -c PGC --export does_not_exist", 1),
    ("pg_check_type_report", "check -c PGC --type-report", 0),
    ("pg_check_type_report_json", "check -c PGC --json", 0),
    ("pg_check_strict", "check -c PGC --strict", 0),
    ("pg_check_target_bq", "check -c PGC --target bigquery", 0),
    ("pg_run_full", "run -c PGC", 0),
    ("pg_run_incr", "run -c PGI", 0),
    ("pg_run_chunked", "run -c PGK", 0),
    ("pg_run_validate", "run -c PGC --validate", 0),
    ("pg_run_reconcile", "run -c PGC --reconcile", 0),
    ("pg_run_val_rec", "run -c PGC --validate --reconcile", 0),
    ("pg_run_json", "run -c PGC --json", 0),
    ("pg_run_summary", "run -c PGC --summary-output LM/pg_run_summary/agg.json", 0),
    ("pg_run_force_no_resume", "run -c PGC --force", 0),
    ("pg_run_resume_no_chk", "run -c PGC --resume", 1),
    ("pg_run_parallel_single", "run -c PGC --parallel-exports", 0),
    ("pg_run_unknown", "run -c PGC --export does_not_exist", 1),
    ("pg_run_idempotent", "run -c PGC", 0),
    ("my_run_full", "run -c MYC", 0),
    ("my_run_incr", "run -c MYI", 0),
    ("my_run_chunked", "run -c MYK", 0),
    ("my_run_validate", "run -c MYC --validate", 0),
    ("my_run_reconcile", "run -c MYC --reconcile", 0),
    ("my_run_json", "run -c MYC --json", 0),
    ("pg_plan_full", "plan -c PGC -e pa_audit --format json -o LM/pg_plan_full/plan.json", 0),
    ("pg_plan_incr", "plan -c PGI -e pa_audit --format json -o LM/pg_plan_incr/plan.json", 0),
    ("pg_plan_chunked", "plan -c PGK -e pa_audit --format json -o LM/pg_plan_chunked/plan.json", 0),
    ("pg_plan_pretty", "plan -c PGC -e pa_audit --format pretty", 0),
    ("pg_plan_json_stdout", "plan -c PGC -e pa_audit --format json", 0),
    ("pg_plan_default", "plan -c PGC -e pa_audit", 0),
    ("pg_plan_unknown", "plan -c PGC -e does_not_exist --format json", 1),
    ("pg_plan_bad_format", "plan -c PGC -e pa_audit --format invalid", 2),
    ("pg_plan_json_errors", "--json-errors plan -c PGC -e does_not_exist --format json", 1),
    ("pg_plan_param_used", "plan -c PGP -e pa_audit --param max_id=20 --format json", 0),
    ("pg_plan_param_unused", "plan -c PGC -e pa_audit --param unused=value --format json", 0),
    ("my_plan_full", "plan -c MYC -e pa_audit --format json -o LM/my_plan_full/plan.json", 0),
    ("my_plan_incr", "plan -c MYI -e pa_audit --format json -o LM/my_plan_incr/plan.json", 0),
    ("my_plan_chunked", "plan -c MYK -e pa_audit --format json -o LM/my_plan_chunked/plan.json", 0),
    ("pg_apply_full", "apply LM/pg_plan_full/plan.json", 0),
    ("pg_apply_incr", "apply LM/pg_plan_incr/plan.json", 0),
    ("pg_apply_chunked", "apply LM/pg_plan_chunked/plan.json", 0),
    ("pg_apply_missing", "apply /tmp/no_such_plan_xyz.json", 1),
    ("pg_apply_no_arg", "apply", 2),
    ("pg_apply_stale_no_force", "apply LM/_stale.json", 1),
    ("pg_apply_stale_force", "apply --force LM/_stale.json", 0),
    ("pg_apply_drift_no_force", "apply LM/_drifted.json", 1),
    ("pg_apply_drift_force", "apply --force LM/_drifted.json", 0),
    ("pg_apply_corrupt", "apply LM/_corrupt.json", 1),
    ("pg_apply_json_errors", "--json-errors apply /tmp/no_such_plan_xyz.json", 1),
    ("my_apply_full", "apply LM/my_plan_full/plan.json", 0),
    ("my_apply_incr", "apply LM/my_plan_incr/plan.json", 0),
    ("my_apply_chunked", "apply LM/my_plan_chunked/plan.json", 0),
    ("pg_apply_legacy_frozen", "apply --force LM/_legacy_v0_7_5_plan.json", 0),
    ("pg_state_help", "state --help", 0),
    ("pg_state_files", "state files -c PGC", 0),
    ("pg_state_progression", "state progression -c PGC", 0),
    ("my_state_files", "state files -c MYC", 0),
    ("pg_state_show", "state show -c PGC", 0),
    ("pg_state_reset", "state reset -c PGC --export pa_audit", 0),
    ("pg_state_reset_unknown", "state reset -c PGC --export nope", 1),
    ("pg_state_reset_chunks_stuck", "state reset-chunks -c PGK --stuck-checkpoints", 0),
    ("pg_state_files_export", "state files -c PGC --export pa_audit --last 5", 0),
    ("pg_metrics", "metrics -c PGC", 0),
    ("pg_metrics_export", "metrics -c PGC --export pa_audit", 0),
    ("my_metrics", "metrics -c MYC", 0),
    ("schema_help", "schema --help", 0),
    ("schema_config", "schema config", 0),
    ("pg_journal", "journal -c PGC --export pa_audit", 0),
    ("my_journal", "journal -c MYC --export pa_audit", 0),
    ("pg_journal_last1", "journal -c PGC --export pa_audit --last 1", 0),
    ("pg_journal_unknown_export", "journal -c PGC --export does_not_exist", 1),
    ("pg_journal_missing_run_id", "journal -c PGC --export pa_audit --run-id RIVET_NO_SUCH_RUN_ID", 0),
    ("pg_validate", "validate -c PGC", 0),
    ("my_validate", "validate -c MYC", 0),
    ("pg_reconcile", "reconcile -c PGC", 2),
    ("pg_reconcile_chk", "reconcile -c PGK", 2),
    ("pg_repair", "repair -c PGK", 2),
    ("pg_init_table", "init --source-env PG_URL --table users -o LM/_init/pg_users.yaml", 0),
    ("my_init_table", "init --source-env MY_URL --table users -o LM/_init/my_users.yaml", 0),
    ("pg_init_unset", "UNSET init --source-env PG_URL --table users -o LM/_init/pg_unset.yaml", 1),
    ("pg_init_no_table", "init --source-env PG_URL -o LM/_init/pg_no_table.yaml", 0),
]

#: Rivet's expected_msg.txt: (cell, stream, op, substring); op `+` must appear, `-` must
#: not, `=1` exactly once.
MESSAGES: list[tuple[str, str, str, str]] = [
    ("pg_plan_param_used", "stderr", "-", "was not referenced"),
    ("pg_plan_param_used", "stdout", "+", "WHERE id <= 20"),
    ("pg_plan_param_unused", "stderr", "+", "--param 'unused' was not referenced"),
    ("pg_plan_param_unused", "stderr", "=1", "was not referenced"),
    *[(cell, "stderr", "=1", text)
      for cell in ("pg_run_full", "pg_run_validate", "pg_run_reconcile", "pg_run_val_rec", "pg_apply_drift_force")
      for text in ("source URL contains plaintext password", "TLS is not enforced")],
    ("pg_apply_drift_no_force", "stderr", "+", "cursor has drifted"),
    ("pg_apply_drift_no_force", "stderr", "+", "pass --force"),
    ("pg_apply_stale_no_force", "stderr", "+", "days old"),
    ("pg_apply_stale_no_force", "stderr", "+", "pass --force"),
    ("pg_apply_corrupt", "stderr", "+", "not a valid Rivet plan artifact"),
    ("pg_apply_corrupt", "stderr", "+", "Hint: only files generated by `rivet plan`"),
    ("pg_apply_missing", "stderr", "+", "cannot read plan file"),
    ("pg_apply_no_arg", "stderr", "+", "the following required arguments were not provided"),
    ("pg_run_force_no_resume", "stderr", "+", "--force without --resume is a no-op"),
    ("pg_run_resume_no_chk", "stderr", "+", "--resume has no effect unless strategy is chunked"),
    ("pg_run_resume_no_chk", "stderr", "+", "destination prefix already has _SUCCESS"),
    ("pg_init_unset", "stderr", "+", "--source-env 'PG_URL' is not set in the environment"),
    ("pg_doctor_unset", "stdout", "+", "env var 'PG_URL' is not set"),
    ("pg_doctor_unset", "stdout", "+", "Some checks failed"),
    ("pg_apply_json_errors", "stderr", "+", '{"error":'),
    ("pg_apply_json_errors", "stderr", "-", "WARN"),
    ("pg_plan_json_errors", "stderr", "+", '{"error":'),
    ("pg_plan_json_errors", "stderr", "-", "WARN"),
    ("pg_state_reset_unknown", "stderr", "+", "not found in config"),
    ("pg_state_reset_unknown", "stderr", "+", "Known exports:"),
    ("pg_state_reset_unknown", "stderr", "+", "Hint: check the spelling"),
    ("pg_state_reset_unknown", "stderr", "+", "rivet state show"),
    *[("pg_check_type_report", "stdout", "+", text) for text in (
        "Export: pa_audit", "Source type", "Rivet type", "Arrow type", "Fidelity", "int4", "Int32", "text",
        "Utf8", "exact")],
    *[("pg_check_type_report_json", "stdout", "+", text) for text in (
        '"export":"pa_audit"', '"source_type":"int4"', '"arrow_type":"Int32"', '"fidelity":"exact"',
        '"violations":[]')],
    *[("pg_check_target_bq", "stdout", "+", text) for text in (
        "[target: bigquery]", "Target type", "INT64", "STRING", "ok")],
    *[("pg_validate", "stdout", "+", text) for text in (
        "pa_audit", "prefix:", "status:    PASSED", "parts:", "verified", "_SUCCESS:  consistent",
        "manifest:  self-consistent")],
    *[("my_validate", "stdout", "+", text) for text in (
        "pa_audit", "prefix:", "status:    PASSED", "parts:", "_SUCCESS:  consistent",
        "manifest:  self-consistent")],
    ("pg_run_validate", "stderr", "+", "run_id:"),
    ("pg_run_validate", "stderr", "+", "success"),
]


@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str


def _with_db(url: str, db: str) -> str:
    return urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path="/" + db))


@contextmanager
def fixture_databases(pg_admin: str, my_admin: str) -> Iterator[tuple[str, str]]:
    """Fresh databases on both servers holding Rivet's 30-row `pa_audit` and a `users`
    table for `init`; dropped afterwards."""
    import psycopg

    db = f"rivet_cm_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    db_exec(my_admin, f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    pg, my = _with_db(pg_admin, db), _with_db(my_admin, db)
    rows = ", ".join(f"({i}, 'row_{i}')" for i in range(1, 31))
    for url, text in ((pg, "TEXT"), (my, "TEXT")):
        db_exec(url, f"CREATE TABLE pa_audit (id INT PRIMARY KEY, name {text}, "
                     "updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)",
                f"INSERT INTO pa_audit (id, name) VALUES {rows}",
                "CREATE TABLE users (id INT PRIMARY KEY, email VARCHAR(100))",
                "INSERT INTO users VALUES (1, 'a@example.com'), (2, 'b@example.com')")
    try:
        yield pg, my
    finally:
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        db_exec(my_admin, f"DROP DATABASE IF EXISTS `{db}`")


def stage_configs(root: Path) -> dict[str, Path]:
    """Rivet's configs, one directory per engine (two state stores, as Rivet stages them)."""
    paths = {}
    for short, name in SHORT.items():
        engine, fields = CONFIGS[name]
        folder = root / "cfg" / engine.lower()
        folder.mkdir(parents=True, exist_ok=True)
        export = {"name": "pa_audit", "query": "SELECT id, name FROM pa_audit", **fields, "format": "parquet",
                  "destination": {"type": "local", "path": f"./out/{name}"}}
        export = {k: export[k] for k in ("name", *[k for k in export if k != "name"])}
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"source": {"type": "postgres" if engine == "PG" else "mysql",
                                                   "url_env": f"{engine}_URL"},
                                        "exports": [export]}, sort_keys=False))
        paths[short] = path
    return paths


def _derive_apply_inputs(lm: Path) -> None:
    """Rivet's derived apply inputs: a corrupt file, a stale and a drifted copy of the
    incremental plan, and a frozen v0.7.5 Rivet plan of pg_full."""
    (lm / "_corrupt.json").write_text("not json {\n")
    try:
        doc = json.loads((lm / "pg_plan_incr" / "plan.json").read_text())
    except (OSError, ValueError):
        doc = {}
    stale = {**doc, "created_at": "2020-01-01T00:00:00Z", "expires_at": "2020-01-02T00:00:00Z"}
    (lm / "_stale.json").write_text(json.dumps(stale, indent=2))
    computed = dict(doc.get("computed") or {})
    computed["cursor_snapshot"] = "99999"
    (lm / "_drifted.json").write_text(json.dumps({**doc, "computed": computed}, indent=2))
    (lm / "_legacy_v0_7_5_plan.json").write_text(json.dumps({
        "rivet_version": "0.7.5", "plan_id": "bdeac0abe51a8ec0050d194d540b7a75",
        "created_at": "2026-05-24T07:11:48.324903Z", "expires_at": "2026-05-25T07:11:48.324903Z",
        "export_name": "pa_audit", "strategy": "full", "plan_fingerprint": "",
        "resolved_plan": {"export_name": "pa_audit", "base_query": "SELECT id, name FROM pa_audit",
                          "strategy": "Snapshot", "format": "parquet", "compression": "zstd",
                          "destination": {"type": "local", "path": "./out/pg_full"},
                          "source": {"type": "postgres", "url": None, "url_env": "PG_URL"}},
        "computed": {"chunk_ranges": [], "chunk_count": 0, "cursor_snapshot": None, "row_estimate": 30},
        "config_path": "/nonexistent/rivet/dev/cli_matrix/cfg/pg/pg_full.yaml"}, indent=2))


def run_matrix(work: Path, pg_url: str, my_url: str, code_root: Path | None = None) -> dict[str, Outcome]:
    """Every cell in order, each `rivet` in a process of its own, from `work` (Rivet runs
    its cells from the matrix directory)."""
    lm = work / "logs"
    lm.mkdir(parents=True, exist_ok=True)
    (lm / "_init").mkdir(exist_ok=True)
    configs = stage_configs(work)
    env = {**os.environ, "PG_URL": pg_url, "MY_URL": my_url, "DATABASE_URL": pg_url}
    env.pop("RIVET_STATE_URL", None)
    if code_root is not None:
        env["PYTHONPATH"] = str(code_root)
    outcomes: dict[str, Outcome] = {}
    for cell, line, _ in CELLS:
        if cell == "pg_apply_stale_no_force":
            _derive_apply_inputs(lm)
        tokens = line.split()
        cell_env = dict(env)
        if tokens and tokens[0] == "UNSET":
            tokens = tokens[1:]
            cell_env.pop("PG_URL")
        argv = [str(configs[t]) if t in configs else t.replace("LM/", f"{lm}/") for t in tokens]
        for arg in argv:
            if arg.startswith(str(lm)) and "/" in arg[len(str(lm)) + 1:]:
                Path(arg).parent.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([sys.executable, "-m", "rivet_core.cli", *argv], capture_output=True, text=True,
                           env=cell_env, cwd=work, timeout=300)
        outcomes[cell] = Outcome(p.returncode, p.stdout, p.stderr)
    return outcomes


def message_holds(outcome: Outcome, stream: str, op: str, text: str) -> bool:
    body = outcome.stdout if stream == "stdout" else outcome.stderr
    if op == "+":
        return text in body
    if op == "-":
        return text not in body
    return body.count(text) == int(op[1:])


def score(outcomes: dict[str, Outcome]) -> tuple[list[str], list[str]]:
    """(cells whose exit code differs, message contract lines that do not hold)."""
    rc_fail = [c for c, _, rc in CELLS if outcomes[c].rc != rc]
    msg_fail = [f"{c} {s} {op} {t}" for c, s, op, t in MESSAGES if not message_holds(outcomes[c], s, op, t)]
    return rc_fail, msg_fail


def main() -> int:
    import tempfile

    code = os.environ.get("RIVET_MATRIX_CODE")
    with tempfile.TemporaryDirectory() as tmp, \
            fixture_databases(os.environ["TEST_PG_DSN"], os.environ["TEST_MYSQL_DSN"]) as (pg, my):
        outcomes = run_matrix(Path(tmp), pg, my, Path(code) if code else None)
    rc_fail, msg_fail = score(outcomes)
    print(f"exit codes: {len(CELLS) - len(rc_fail)}/{len(CELLS)}")
    print(f"messages:   {len(MESSAGES) - len(msg_fail)}/{len(MESSAGES)}")
    for c in rc_fail:
        o = outcomes[c]
        expected = next(rc for cell, _, rc in CELLS if cell == c)
        print(f"  rc  {c}: {o.rc} (Rivet {expected}) {(o.stderr.strip().splitlines() or [''])[-1][:160]}")
    for m in msg_fail:
        print(f"  msg {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
