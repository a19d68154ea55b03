"""No piece of a source password reaches Dagster's instance (issue 20 item 1): the run
storage, the event log and the compute logs of a persistent instance are scanned after a
successful and a failed materialization whose source URL holds a password with spaces and
an unencoded `@` — the shapes that used to leak."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import dagster as dg

from rivet_dagster import build_definitions
from tests.dagster.support import Target, create_orders, export_block, run_job
from tests.helpers import db_exec, write_config

PASSWORD = "Tok3n SPACEPW@AtPart2 zz"


def test_no_piece_of_the_password_is_stored_by_dagster(pg_url: str, tmp_path: Path,
                                                       monkeypatch) -> None:  # noqa: ANN001
    create_orders(pg_url, rows=50)
    db_exec(pg_url, "DROP ROLE IF EXISTS spacey",
            f"CREATE ROLE spacey LOGIN PASSWORD '{PASSWORD}'", "GRANT SELECT ON orders TO spacey")
    u = urllib.parse.urlsplit(pg_url)
    raw_url = f"postgresql://spacey:{PASSWORD}@{u.hostname}:{u.port}{u.path}"  # unencoded, as users write it
    monkeypatch.setenv("SHOP_URL", raw_url)
    target = Target("local", tmp_path)
    good = export_block("orders_ok", "full", target.destination("orders_ok"))
    bad = export_block("orders_bad", "full", target.destination("orders_bad"), table="no_such_table")
    config = write_config(tmp_path, {"type": "postgres", "url_env": "SHOP_URL"}, [good, bad])
    defs = build_definitions(config)
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.DagsterInstance.local_temp(str(home)) as instance:
        assert run_job(defs, "orders_ok_job", instance).success
        assert not run_job(defs, "orders_bad_job", instance).success
        events = "\n".join(str(r.event_log_entry) for r in instance.get_event_records(
            dg.EventRecordsFilter(event_type=dg.DagsterEventType.STEP_FAILURE)))
    pieces = ["Tok3n", "SPACEPW", "AtPart2", PASSWORD]
    for piece in pieces:
        assert piece not in events, f"{piece!r} in a failure event"
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for piece in pieces:
                assert piece.encode() not in data, f"{piece!r} stored in {path.relative_to(home)}"
