"""Every config Rivet ships to be run, through our `rivet run` and `rivet validate` on the
suite's servers (issue 35 item 3): per config, passed, failed with the reason, refused with
the message, or not run here because it writes to a cloud this suite does not start.

Rivet's configs are read from a Rivet checkout — a work tree, or a git directory such as the
one `fetch github:panchenkoai/rivet` leaves — named by `RIVET_SOURCE`; nothing of Rivet's is
copied into this repository. The databases are seeded with Rivet's own fixtures (its
`dev/postgres/init.sql`, `dev/mysql/init.sql`, `demo/setup_demo_tables*.sql`, `dev/e2e/seed_*.sql`
and the 30-row `pa_audit`; two MySQL 8 spellings are adapted for MariaDB, `_for_mariadb`).

Only the connection is rewritten, since Rivet's configs name its docker servers: the source
becomes `url_env: RIVET_SHIPPED_URL` (the suite's PostgreSQL or MariaDB, seeded database), an
S3 destination gets the suite's endpoint, bucket and key variables. Everything else — modes,
queries, formats, tuning, destinations' paths and prefixes — runs as Rivet ships it.

    RIVET_SOURCE=/path/to/rivet python -m tests.rivet_matrix.shipped_configs

prints one line per config and the counts (docs/rivet-compat.md "Rivet's shipped configs").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import db_exec

#: The folders the issue counts as "shipped to be run" (issue 35).
SHIPPED = ("examples", "demo", "dev/e2e", "dev/workbench", "dev/scenarios", "dev/legacy", "dev/path_matrix/cfg")
#: Configs Rivet documents for features this project does not have: refused at load.
_NO_MSSQL = "unknown variant `mssql` for `type` at source — expected one of: postgres, mysql, sqlite"
REFUSED = {
    "docs/best-practices/rivet_mssql_gentle.yaml": _NO_MSSQL,
    "docs/recipes/airflow/dags/mssql.yaml": _NO_MSSQL,
    "docs/recipes/airflow/dags/mssql.s3.yaml": _NO_MSSQL,
}
#: Destinations whose servers this suite does not start (scripts/services.sh: pg mysql s3).
NOT_HERE = ("gcs", "azure")
_CONNECTION = ("url", "url_env", "url_file", "host", "port", "user", "password", "password_env", "database",
               "socket", "tls", "environment")
URL_VAR = "RIVET_SHIPPED_URL"


@dataclass(frozen=True)
class Outcome:
    """What became of one config: `passed`, `failed`, `refused` or `not here`, and why."""

    status: str
    reason: str = ""


def rivet_tree(cache: Path) -> Path:
    """Rivet's files: `RIVET_SOURCE` itself when it is a work tree, else its HEAD unpacked
    into `cache` (a git directory). A missing variable fails, naming it."""
    source = os.environ.get("RIVET_SOURCE")
    if not source:
        raise RuntimeError("RIVET_SOURCE is not set — point it at a Rivet checkout (git clone "
                           "https://github.com/panchenkoai/rivet) or the git directory `fetch github:panchenkoai/rivet` "
                           "leaves")
    root = Path(source)
    if (root / "examples").is_dir():
        return root
    if not (cache / "examples").is_dir():
        wanted = [*SHIPPED, *sorted({str(Path(r).parent) for r in REFUSED}), "dev/postgres", "dev/mysql",
                  "dev/matrices/_common/fixtures"]
        archive = subprocess.run(["git", f"--git-dir={root}", "archive", "HEAD", *wanted], capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(cache, filter="data")
    return cache


def configs(tree: Path) -> list[str]:
    """The shipped configs (YAML with `exports:`), then the documented refusals; relative paths."""
    found = []
    for folder in SHIPPED:
        for path in sorted((tree / folder).rglob("*.y*ml")):
            doc = yaml.safe_load(path.read_text())
            if isinstance(doc, dict) and "exports" in doc:
                found.append(path.relative_to(tree).as_posix())
    return found + sorted(REFUSED)


def _seed_pg(url: str, tree: Path) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for script in ("dev/postgres/init.sql", "demo/setup_demo_tables.sql", "dev/e2e/seed_pg.sql",
                       "dev/matrices/_common/fixtures/pa_audit_pg.sql"):
            conn.execute((tree / script).read_text())


#: MySQL 8 spellings MariaDB (the suite's server) lacks, in Rivet's MySQL seeds: `CAST('…' AS
#: JSON)` (MariaDB's JSON column takes the text as it is) and the recursion limit's name.
_CAST_JSON = re.compile(r"CAST\(('(?:[^']|'')*') AS JSON\)")


def _for_mariadb(script: str) -> str:
    return _CAST_JSON.sub(r"\1", script).replace("cte_max_recursion_depth", "max_recursive_iterations")


def _seed_mysql(url: str, tree: Path) -> None:
    from tests.helpers import mysql_connect

    conn = mysql_connect(url, client_flag=65536)  # CLIENT.MULTI_STATEMENTS: the scripts as written
    try:
        with conn.cursor() as cur:
            for script in ("dev/mysql/init.sql", "demo/setup_demo_tables_mysql.sql", "dev/e2e/seed_mysql.sql",
                           "dev/matrices/_common/fixtures/pa_audit_mysql.sql"):
                cur.execute(_for_mariadb((tree / script).read_text()))
                while cur.nextset():
                    pass
        conn.commit()
    finally:
        conn.close()


@contextmanager
def seeded_databases(pg_admin: str, my_admin: str, tree: Path) -> Iterator[dict[str, str]]:
    """A fresh database on each server holding Rivet's fixtures: engine → URL; dropped after."""
    import psycopg

    from tests.rivet_matrix.cli_matrix import _with_db

    db = f"rivet_sc_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    db_exec(my_admin, f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4")
    urls = {"postgres": _with_db(pg_admin, db), "mysql": _with_db(my_admin, db)}
    try:
        _seed_pg(urls["postgres"], tree)
        _seed_mysql(urls["mysql"], tree)
        yield urls
    finally:
        with psycopg.connect(pg_admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        db_exec(my_admin, f"DROP DATABASE IF EXISTS `{db}`")


def _rewrite(doc: dict[str, Any], s3: dict[str, str] | None) -> dict[str, Any]:
    """The connection points at the suite's servers (module docstring); nothing else changes."""
    source = {k: v for k, v in (doc.get("source") or {}).items() if k not in _CONNECTION}
    doc["source"] = {"type": source.pop("type", None), "url_env": URL_VAR, **source}
    for export in doc.get("exports") or []:
        dest = export.get("destination") or {}
        if dest.get("type") == "s3" and s3 is not None:
            dest.update(bucket=s3["bucket"], endpoint=s3["endpoint"], region="us-east-1",
                        access_key_env="RIVET_TEST_AK", secret_key_env="RIVET_TEST_SK")
            for key in ("aws_profile", "session_token_env", "credentials_file"):
                dest.pop(key, None)
    return doc


def _last_error(done: subprocess.CompletedProcess[str]) -> str:
    """Why a command failed: the first export's `error:` line, else the last `Error` line."""
    lines = done.stderr.splitlines()
    found = [ln.strip() for ln in lines if ln.strip().startswith("error:")] or \
        [ln for ln in lines if ln.startswith("Error")] or lines[-1:] or ["(no output)"]
    return " ".join(found[0].split())[:300]


def run_config(rel: str, tree: Path, work: Path, urls: dict[str, str], s3: dict[str, str] | None) -> Outcome:
    """One config through `rivet run` then `rivet validate` (or `check` for a refusal)."""
    source = tree / rel
    folder = work / rel.replace("/", "__")
    shutil.copytree(source.parent, folder)  # query_file and url_file siblings come along
    config = folder / source.name
    try:
        doc = yaml.safe_load(config.read_text())
    except yaml.YAMLError as exc:
        return Outcome("failed", f"not YAML: {exc}")
    engine = (doc.get("source") or {}).get("type")
    dests = {(e.get("destination") or {}).get("type") for e in doc.get("exports") or []}
    env = {**os.environ, URL_VAR: urls.get(engine, "postgresql://unused@127.0.0.1:1/x")}
    env.pop("RIVET_STATE_URL", None)
    if rel in REFUSED:
        done = _rivet(["check", "-c", str(config)], folder, env)
        if done.returncode != 0 and REFUSED[rel] in done.stderr:
            return Outcome("refused", REFUSED[rel])
        return Outcome("failed", f"expected a refusal saying {REFUSED[rel]!r}, got exit {done.returncode}: "
                                 f"{_last_error(done)}")
    if dests & set(NOT_HERE):
        return Outcome("not here", f"writes to {', '.join(sorted(dests & set(NOT_HERE)))}")
    config.write_text(yaml.safe_dump(_rewrite(doc, s3), sort_keys=False))
    ran = _rivet(["run", "-c", str(config)], folder, env)
    if ran.returncode != 0:
        return Outcome("failed", f"run exit {ran.returncode}: {_last_error(ran)}")
    if dests == {"stdout"}:
        return Outcome("passed", "stdout: nothing to validate")
    checked = _rivet(["validate", "-c", str(config)], folder, env)
    if checked.returncode != 0:
        return Outcome("failed", f"validate exit {checked.returncode}: {_last_error(checked)}")
    return Outcome("passed")


def _rivet(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "rivet_core.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)
    (cwd / f"rivet-{args[0]}.stderr").write_text(done.stderr)  # the whole story, beside the config
    return done


def _s3_bucket() -> dict[str, str] | None:
    """A fresh bucket on the suite's S3 server, or None when TEST_S3_ENDPOINT is unset."""
    endpoint = os.environ.get("TEST_S3_ENDPOINT")
    if not endpoint:
        return None
    import boto3

    bucket = f"rivet-sc-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id=os.environ.get("TEST_S3_ACCESS_KEY", ""),
                 aws_secret_access_key=os.environ.get("TEST_S3_SECRET_KEY", "")).create_bucket(Bucket=bucket)
    os.environ.setdefault("RIVET_TEST_AK", os.environ.get("TEST_S3_ACCESS_KEY", ""))
    os.environ.setdefault("RIVET_TEST_SK", os.environ.get("TEST_S3_SECRET_KEY", ""))
    return {"bucket": bucket, "endpoint": endpoint}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="rivet-shipped-") as tmp:
        tree = rivet_tree(Path(tmp) / "rivet")
        s3 = _s3_bucket()
        outcomes: dict[str, Outcome] = {}
        with seeded_databases(os.environ["TEST_PG_DSN"], os.environ["TEST_MYSQL_DSN"], tree) as urls:
            for rel in configs(tree):
                outcomes[rel] = run_config(rel, tree, Path(tmp) / "work", urls, s3)
                print(f"{outcomes[rel].status:9} {rel}  {outcomes[rel].reason}", flush=True)
    counts = {s: sum(o.status == s for o in outcomes.values()) for s in ("passed", "failed", "refused", "not here")}
    print(" · ".join(f"{k} {v}" for k, v in counts.items()), f"(of {len(outcomes)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
