"""Retry classifier (docs/rivet-compat.md "Retries") on real errors provoked from the real servers."""

from __future__ import annotations

import socket
import urllib.parse

import psycopg
import pymysql
import pytest

from rivet_core.config.tuning import ResolvedTuning
from rivet_core.errors import ConfigError, SourceError, TransientError
from rivet_core.source import backoff_ms, classify_error, open_source

TUNING = ResolvedTuning(statement_timeout_s=30, lock_timeout_s=5)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # nothing listens once the socket closes


@pytest.mark.postgres
def test_a_pg_syntax_error_is_a_permanent_source_error(pg_url: str) -> None:
    with open_source(pg_url, TUNING) as session:
        with pytest.raises(SourceError) as caught:
            session.scalar("SELEC 1")
    decision = classify_error(caught.value)
    assert not decision.transient and "42601" in decision.reason
    assert isinstance(caught.value.__cause__, psycopg.errors.SyntaxError)


@pytest.mark.postgres
def test_a_pg_statement_timeout_is_permanent_not_retried(pg_url: str) -> None:
    with open_source(pg_url, ResolvedTuning(statement_timeout_s=1)) as session:
        with pytest.raises(SourceError) as caught:
            session.scalar("SELECT pg_sleep(2)")
    assert "statement timeout" in str(caught.value)
    decision = classify_error(caught.value)
    assert not decision.transient and "57014" in decision.reason


@pytest.mark.postgres
def test_a_pg_lock_timeout_is_transient_on_the_same_connection(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("CREATE TABLE locked (id int)")
    with psycopg.connect(pg_url) as holder:
        holder.execute("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        with open_source(pg_url, ResolvedTuning(lock_timeout_s=1)) as session:
            with pytest.raises(TransientError) as caught:
                session.scalar("SELECT count(*) FROM locked")
        holder.rollback()
    decision = classify_error(caught.value)
    assert decision.transient and not decision.needs_reconnect


@pytest.mark.postgres
def test_connecting_to_a_closed_pg_port_is_transient_and_hints_at_doctor() -> None:
    url = f"postgresql://rivet:s3cretpass@127.0.0.1:{_closed_port()}/db"
    with pytest.raises(TransientError) as caught:
        with open_source(url, TUNING):
            pass
    message = str(caught.value)
    assert "rivet doctor" in message and "s3cretpass" not in message
    decision = classify_error(caught.value)
    assert decision.transient and decision.needs_reconnect


@pytest.mark.mysql
def test_mysql_syntax_and_missing_table_errors_are_permanent(mysql_url: str) -> None:
    with open_source(mysql_url, TUNING) as session:
        with pytest.raises(SourceError) as syntax:
            session.scalar("SELEC 1")
        with pytest.raises(SourceError) as missing:
            session.scalar("SELECT * FROM no_such_table")
    assert "1064" in classify_error(syntax.value).reason
    assert "1146" in classify_error(missing.value).reason


@pytest.mark.mysql
def test_a_mariadb_statement_timeout_is_permanent(mysql_url: str) -> None:
    with open_source(mysql_url, ResolvedTuning(statement_timeout_s=1)) as session:
        with pytest.raises(SourceError) as caught:
            session.scalar("SELECT SLEEP(2) FROM (SELECT 1) AS one")
    assert not classify_error(caught.value).transient


@pytest.mark.mysql
def test_connecting_to_a_closed_mysql_port_is_transient(mysql_url: str) -> None:
    parts = urllib.parse.urlsplit(mysql_url)
    url = f"mysql://root:s3cretpass@127.0.0.1:{_closed_port()}{parts.path}"
    with pytest.raises(TransientError) as caught:
        with open_source(url, TUNING):
            pass
    assert "s3cretpass" not in str(caught.value)
    assert isinstance(caught.value.__cause__, pymysql.err.OperationalError)
    assert classify_error(caught.value).needs_reconnect


@pytest.mark.mysql
def test_a_wrong_mysql_password_is_permanent(mysql_url: str) -> None:
    parts = urllib.parse.urlsplit(mysql_url)
    url = f"mysql://no_such_user:wrongpass@{parts.hostname}:{parts.port}{parts.path}"
    with pytest.raises(SourceError) as caught:
        with open_source(url, TUNING):
            pass
    assert "1045" in classify_error(caught.value).reason
    assert "wrongpass" not in str(caught.value)


def test_message_only_errors_are_classified_by_their_text() -> None:
    assert classify_error(ConnectionResetError("reset")).needs_reconnect
    lock = classify_error(RuntimeError("Lock wait timeout exceeded; try restarting"))
    assert lock.transient and not lock.needs_reconnect
    assert classify_error(RuntimeError("sorry, too many clients already")).extra_delay_ms == 15_000
    assert classify_error(RuntimeError("deadlock detected")).extra_delay_ms == 1_000
    assert not classify_error(RuntimeError("canceling statement due to statement timeout")).transient
    assert not classify_error(RuntimeError("something nobody has seen")).transient
    assert not classify_error(ConfigError("bad config")).transient


def test_backoff_doubles_caps_at_a_minute_and_adds_the_extra_delay() -> None:
    assert [backoff_ms(k, 5_000) for k in (1, 2, 3, 4, 5, 10)] == [
        5_000, 10_000, 20_000, 40_000, 60_000, 60_000]
    assert backoff_ms(10, 5_000, 500) == 60_500
    assert backoff_ms(10_000, 2_000) == 60_000  # a huge attempt neither overflows nor hangs
