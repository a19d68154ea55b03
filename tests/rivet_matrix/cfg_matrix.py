"""The part of Rivet's config matrix (its `dev/cfg_matrix`) that its `expected_msg.txt`
grades: nine of its fixtures, each probed with `doctor -c`, `check -c` and `plan -c -e
<first export>`, and the 17 substring rules over what they print. The fixtures' fields and
the rules are Rivet's, as facts; `probe` runs our `rivet` and `RULES` grades it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.rivet_matrix.cli_matrix import Outcome

_QUERY = "SELECT id, name FROM pa_audit"


def _export(sid: str, **fields: object) -> dict[str, object]:
    return {"name": "pa_audit", **fields, "format": "parquet",
            "destination": fields.pop("destination", None) or {"type": "local", "path": f"./out/{sid}"}}


def _pg(sid: str, **fields: object) -> dict[str, object]:
    return {"source": {"type": "postgres", "url_env": "PG_URL"}, "exports": [_export(sid, **fields)]}


def _my_tls(sid: str, mode: str) -> dict[str, object]:
    return {"source": {"type": "mysql", "url_env": "MY_URL", "tls": {"mode": mode}},
            "exports": [_export(sid, query=_QUERY, mode="full")]}


#: Rivet's fixtures the rules name: id → config.
FIXTURES: dict[str, dict[str, object]] = {
    "b07_my_tls_require": _my_tls("b07", "require"),
    "b08_my_tls_verify_ca": _my_tls("b08", "verify-ca"),
    "b09_my_tls_verify_full": _my_tls("b09", "verify-full"),
    "g18_chunked_no_column": _pg("g18", table="pa_audit", mode="chunked", chunk_size=10),
    "c06_chunked_parquet": _pg("c06", table="pa_audit", mode="chunked", chunk_column="id", chunk_size=10),
    "c10_chunked_with_chunk_count": _pg("c10", table="pa_audit", mode="chunked", chunk_column="id",
                                        chunk_count=4),
    "g16_query_file_traversal": _pg("g16", query_file="../../../../etc/passwd", mode="full"),
    "d03_dest_s3": _pg("d03", query=_QUERY, mode="full", destination={
        "type": "s3", "bucket": "rivet-cfg-matrix-test", "prefix": "d03/", "region": "us-east-1",
        "access_key_env": "AWS_ACCESS_KEY_ID", "secret_key_env": "AWS_SECRET_ACCESS_KEY"}),
    "c01_full_query_parquet": _pg("c01", query=_QUERY, mode="full"),
}

#: Rivet's dev/cfg_matrix/expected_msg.txt: (fixture, probe, stream, op, substring).
RULES: list[tuple[str, str, str, str, str]] = [
    *[("b07_my_tls_require", probe, "stderr", "-", "panicked") for probe in ("doctor", "check", "plan")],
    ("b08_my_tls_verify_ca", "doctor", "stderr", "-", "panicked"),
    ("b09_my_tls_verify_full", "doctor", "stderr", "-", "panicked"),
    ("g18_chunked_no_column", "plan", "stderr", "+", "chunk_column not set"),
    ("g18_chunked_no_column", "plan", "stderr", "+", "auto-resolved to 'id'"),
    ("g18_chunked_no_column", "plan", "stderr", "+", "Set `chunk_column:` explicitly"),
    ("c06_chunked_parquet", "plan", "stderr", "-", "chunk_column not set"),
    ("c10_chunked_with_chunk_count", "plan", "stderr", "-", "chunk_column not set"),
    ("g16_query_file_traversal", "doctor", "stdout", "+", "query_file path must not contain '..'"),
    ("g16_query_file_traversal", "check", "stderr", "+", "query_file path must not contain '..'"),
    ("g16_query_file_traversal", "plan", "stderr", "+", "query_file path must not contain '..'"),
    ("d03_dest_s3", "check", "stderr", "+", "destination preflight failed"),
    ("d03_dest_s3", "check", "stderr", "+", "AWS_ACCESS_KEY_ID"),
    ("c01_full_query_parquet", "plan", "stderr", "-", "source URL contains plaintext password"),
    ("c06_chunked_parquet", "plan", "stderr", "-", "TLS is not enforced"),
]


def probe(work: Path, pg_url: str, my_url: str) -> dict[tuple[str, str], Outcome]:
    """Every fixture × doctor / check / plan, each `rivet` a process of its own, from `work`
    (the fixtures sit two folders down, as Rivet's `cfg/<group>/` do, so the traversal
    fixture's `../../../../etc/passwd` leaves the config's folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PG_URL=pg_url, MY_URL=my_url)
    env.pop("RIVET_STATE_URL", None)
    out = {}
    for sid, config in FIXTURES.items():
        path = work / "cfg" / sid.split("_")[0] / f"{sid}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        for name, argv in (("doctor", ["doctor", "-c", str(path)]), ("check", ["check", "-c", str(path)]),
                           ("plan", ["plan", "-c", str(path), "-e", "pa_audit"])):
            p = subprocess.run([sys.executable, "-m", "rivet_core.cli", *argv], capture_output=True, text=True,
                               env=env, cwd=work, timeout=300)
            out[(sid, name)] = Outcome(p.returncode, p.stdout, p.stderr)
    return out


def main() -> int:
    import tempfile

    from tests.rivet_matrix.cli_matrix import fixture_databases, message_holds

    with tempfile.TemporaryDirectory() as tmp, \
            fixture_databases(os.environ["TEST_PG_DSN"], os.environ["TEST_MYSQL_DSN"]) as (pg, my):
        outcomes = probe(Path(tmp), pg, my)
    failed = [r for r in RULES if not message_holds(outcomes[(r[0], r[1])], r[2], r[3], r[4])]
    print(f"cfg_matrix messages: {len(RULES) - len(failed)}/{len(RULES)}")
    for sid, name, stream, op, text in failed:
        o = outcomes[(sid, name)]
        body = o.stdout if stream == "stdout" else o.stderr
        print(f"  {sid} {name}/{stream} {op} {text}\n    rc={o.rc} {body.strip()[-300:]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
