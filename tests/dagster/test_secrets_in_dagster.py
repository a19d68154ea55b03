"""No piece of a source password reaches Dagster's instance (issue 20 item 1): the run
storage, the event log and the compute logs of a persistent instance are scanned after a
successful and a failed materialization whose source URL holds a password with spaces and
an unencoded `@` — the shapes that used to leak."""

from __future__ import annotations

import os
import urllib.parse
import uuid
from pathlib import Path

import dagster as dg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rivet_core import redact
from rivet_dagster import build_definitions
from tests.dagster.support import Target, create_orders, export_block, run_job
from tests.helpers import db_exec, write_config

PASSWORD = "Tok3n SPACEPW@AtPart2 zz"


@pytest.fixture
def forget_registered_secrets():  # noqa: ANN201
    """Registered secrets are process-wide: forget what a test registered."""
    before = set(redact._registered)
    yield
    redact._registered.intersection_update(before)


def test_no_piece_of_the_password_is_stored_by_dagster(pg_url: str, tmp_path: Path, monkeypatch,  # noqa: ANN001
                                                       forget_registered_secrets) -> None:  # noqa: ANN001
    create_orders(pg_url, rows=50)
    role = f"spacey_{uuid.uuid4().hex[:10]}"  # roles are cluster-wide
    db_exec(pg_url, f"CREATE ROLE {role} LOGIN PASSWORD '{PASSWORD}'", f"GRANT SELECT ON orders TO {role}")
    u = urllib.parse.urlsplit(pg_url)
    raw_url = f"postgresql://{role}:{PASSWORD}@{u.hostname}:{u.port}{u.path}"  # unencoded, as users write it
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


ALPHABET = "".join(chr(c) for c in range(33, 127)) + " éß€中"


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(password=st.text(alphabet=ALPHABET, min_size=10, max_size=24).filter(lambda p: p.strip() == p))
def test_generated_passwords_never_reach_the_dagster_instance(pg_url: str, tmp_path_factory, password: str) -> None:  # noqa: ANN001
    """The whole printable range (and some non-ASCII) in a percent-encoded URL: a run that
    succeeds proves the driver got the password; then no 6+-character piece of it is in any
    file of the instance."""
    # The redactor's registry is process-wide: forget this example's password afterwards,
    # or it would mask text (say, a run of zeros) in later tests.
    before = set(redact._registered)
    tmp_path = tmp_path_factory.mktemp("gen")
    create_orders(pg_url, rows=20) if not db_exec(pg_url, "SELECT to_regclass('orders') IS NOT NULL")[0][0] else None
    escaped = password.replace("'", "''")
    role = f"gen_{uuid.uuid4().hex[:10]}"  # roles are cluster-wide: one per example
    db_exec(pg_url, f"CREATE ROLE {role} LOGIN PASSWORD '{escaped}'", f"GRANT SELECT ON orders TO {role}")
    u = urllib.parse.urlsplit(pg_url)
    url = f"postgresql://{role}:{urllib.parse.quote(password, safe='')}@{u.hostname}:{u.port}{u.path}"
    os.environ["GEN_SHOP_URL"] = url
    try:
        target = Target("local", tmp_path)
        config = write_config(tmp_path, {"type": "postgres", "url_env": "GEN_SHOP_URL"},
                              [export_block("orders_ok", "full", target.destination("orders_ok")),
                               export_block("orders_bad", "full", target.destination("orders_bad"),
                                            table="no_such_table")])
        defs = build_definitions(config)
        home = tmp_path / "home"
        home.mkdir()
        with dg.DagsterInstance.local_temp(str(home)) as instance:
            assert run_job(defs, "orders_ok_job", instance).success
            assert not run_job(defs, "orders_bad_job", instance).success
        pieces = {password, *(w for w in password.split() if len(w) >= 6)}
        for path in home.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for piece in pieces:
                    assert piece.encode() not in data, f"a piece of the password is in {path.relative_to(home)}"
    finally:
        os.environ.pop("GEN_SHOP_URL", None)
        redact._registered.intersection_update(before)
