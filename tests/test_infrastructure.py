"""The test servers are there: one smoke test per service, through the shared fixtures.

When one of these fails, every integration test that needs that server fails too; these
tests make the cause obvious (which server, which variable) instead of burying it in an
export error. `make test` starts the servers; see tests/conftest.py for the variables.
"""

from __future__ import annotations

import uuid

import psycopg
import pymysql


def test_postgresql_accepts_a_table_an_insert_and_a_select(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE probe (id integer PRIMARY KEY, name text NOT NULL)")
        conn.execute("INSERT INTO probe VALUES (1, 'ünïcode'), (2, 'two')")
        rows = conn.execute("SELECT id, name FROM probe ORDER BY id").fetchall()
    assert rows == [(1, "ünïcode"), (2, "two")]


def test_mariadb_accepts_a_table_an_insert_and_a_select(mysql_url: str) -> None:
    import urllib.parse

    u = urllib.parse.urlsplit(mysql_url)
    conn = pymysql.connect(
        host=u.hostname,
        port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"),
        charset="utf8mb4",
        autocommit=True,
        connect_timeout=10,
    )
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE probe (id INT PRIMARY KEY, name VARCHAR(50) NOT NULL)")
            cur.execute("INSERT INTO probe VALUES (1, 'ünïcode'), (2, 'two')")
            cur.execute("SELECT id, name FROM probe ORDER BY id")
            rows = cur.fetchall()
    finally:
        conn.close()
    assert rows == ((1, "ünïcode"), (2, "two"))


def test_s3_server_stores_and_returns_an_object_with_real_credentials(s3) -> None:  # noqa: ANN001
    client = s3.client()
    key = f"probe/{uuid.uuid4().hex}.txt"
    body = b"rivet infrastructure probe\n" * 100
    client.put_object(Bucket=s3.bucket, Key=key, Body=body)
    got = client.get_object(Bucket=s3.bucket, Key=key)["Body"].read()
    listed = [
        o["Key"] for o in client.list_objects_v2(Bucket=s3.bucket, Prefix="probe/")["Contents"]
    ]
    assert got == body
    assert listed == [key]
