"""Issue 20 items 1, 2 and 11: no URL shape carries a password past the redactor, and the
URL parser and the redactor split the userinfo the same way (at the LAST `@`).

The reproductions of the issue run first, exactly as reported: a password with a space in
`url_env` (`postgresql://u:Tok3n SPACEPW@host:1/db`), an unencoded `@`
(`u:AtPart1@AtPart2@host`), and `rivet doctor` on `postgresql://u:pw@[::1/db`. Then a
hypothesis property test draws passwords from the whole printable range (spaces, `@:/#?%'"`,
backslashes, percent escapes, unicode), makes them the real password of a MariaDB user (the
server checks passwords; a run that succeeds proves the driver received it byte for byte),
and writes them as a raw URL, a percent-encoded URL or `password_env`. A successful run, a
failing run (`--json-errors`, connection refused), `doctor`, `metrics` and `journal` then
leave their artifacts — stdout, stderr, run reports, the state store file and its tables
`export_metrics` and `run_journal`, the destination's manifest — and none may hold any piece
of the password.

Leak detection does not depend on guessing the forms a message could use: every word of a
generated password starts with the ASCII marker `Qv7Zk`, which no encoding (percent, JSON,
repr, libpq quoting) changes, so any surviving piece of a password shows up as the marker.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from rivet_core.config.source_url import inline_url_password, normalise_url, split_userinfo
from rivet_core.errors import ConfigError
from rivet_core.redact import redact_secrets, register_secret
from tests.hardening.support import cli, free_port
from tests.helpers import db_exec, mysql_exec

MARKER = "Qv7Zk"


@contextlib.contextmanager
def _fresh_registry() -> Iterator[None]:
    """Forget the secrets registered inside the block. The redactor's registry is
    process-wide: the generated passwords (and their pieces) must neither mask text in the
    tests that run after these nor hide a later example's leak."""
    from rivet_core import redact

    with redact._lock:
        before = set(redact._registered)
    try:
        yield
    finally:
        with redact._lock:
            redact._registered.intersection_update(before)


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> Iterator[None]:
    with _fresh_registry():
        yield

# ============================================================ the redactor and the parser


@pytest.mark.parametrize(("text", "hidden"), [
    ("postgresql://u:Tok3n SPACEPW@host:1/db failed", ["Tok3n", "SPACEPW"]),
    ("mysql://u:AtPart1@AtPart2@host/db", ["AtPart1", "AtPart2"]),
    ("conninfo: host=h password='a b\\'c d' user=u", ["a b", "c d"]),
    ('dsn "password": x password="q r s" end', ["q r s"]),
    ("PGPASSWORD=hunter22 psql", ["hunter22"]),
    ("https://h/o?X-Amz-Signature=abcdef&x=1", ["abcdef"]),
])
def test_the_redactor_hides_every_unregistered_url_and_parameter_shape(text, hidden):
    out = redact_secrets(text)
    assert [h for h in hidden if h in out] == []
    assert "REDACTED" in out
    assert redact_secrets(out) == out  # idempotent


@pytest.mark.parametrize("text", [
    "postgresql://u@host/db: permission denied for user x@y",
    "see postgresql://host:5432/db for user x@y",
    "mysql://db:3306 failed: Access denied for user rv@localhost",
    "expected mysql://user:password@host:port/database",
])
def test_the_redactor_leaves_urls_without_a_password_alone(text):
    assert redact_secrets(text) == text


@pytest.mark.parametrize("password", ["Tok3n SPACEPW", "AtPart1@AtPart2", "ünï 密码 pw", "q'u\"o\\te"])
def test_a_registered_password_is_masked_in_every_form_a_message_can_quote_it(password):
    register_secret(password)
    forms = [password, urllib.parse.quote(password, safe=""), urllib.parse.quote_plus(password),
             json.dumps(password)[1:-1], json.dumps(password, ensure_ascii=False)[1:-1],
             repr(password)[1:-1], password.replace("\\", "\\\\").replace("'", "\\'")]
    for form in forms:
        assert form not in redact_secrets(f"driver said: {form} (x)"), form
    # a driver that splits at whitespace / '@' quotes a piece: pieces of 6+ chars are hidden
    for piece in ("SPACEPW", "AtPart2", "AtPart1"):
        if piece in password:
            assert piece not in redact_secrets(f'invalid connection option "{piece}"')


@pytest.mark.parametrize(("url", "user", "password", "host"), [
    ("postgresql://u:AtPart1@AtPart2@db:5432/x", "u", "AtPart1@AtPart2", "db:5432/x"),
    ("postgresql://u:Tok3n SPACEPW@db/x", "u", "Tok3n SPACEPW", "db/x"),
    ("mysql://u:a/b#c?d:e@db/x?ssl-mode=required", "u", "a/b#c?d:e", "db/x?ssl-mode=required"),
    ("mysql://u@db/x", "u", None, "db/x"),
])
def test_the_parser_splits_the_userinfo_at_the_last_at_like_the_redactor(url, user, password, host):
    parts = split_userinfo(url)
    assert parts is not None and parts[2] == host
    assert inline_url_password(url) == password
    normalised = normalise_url(url, "postgres" if url.startswith("postgres") else "mysql", "url",
                               Path("/"))
    parsed = urllib.parse.urlsplit(normalised)  # what every driver reads
    assert urllib.parse.unquote(parsed.username or "") == user
    assert (None if parsed.password is None else urllib.parse.unquote(parsed.password)) == password
    assert redact_secrets(url) == redact_secrets(normalised)  # both show the host, no userinfo
    assert (password or "\x00") not in redact_secrets(f"{url} {normalised}")


def test_a_password_in_the_query_is_registered_in_all_its_forms():
    normalise_url("postgresql://u@db/x?sslmode=require&password=Qu3ry%20Pw%27d", "postgres", "url",
                  Path("/"))
    text = redact_secrets("driver: password 'Qu3ry Pw\\'d' / Qu3ry%20Pw%27d / Qu3ry Pw'd")
    assert "Qu3ry" not in text and text.count("REDACTED") == 3


@pytest.mark.parametrize(("url", "message"), [
    ("postgresql://u:pw@[::1/db", "is not a valid bracketed IPv6 address"),
    ("postgresql://u:pw@db:99999/x", "is not a number from 1 to 65535"),
    ("postgresql://u:pw@db:0/x", "is 0"),
    ("mysql://u:pw@d b/x", "contains whitespace"),
])
def test_an_unparsable_host_is_one_config_error_that_never_shows_the_password(url, message):
    with pytest.raises(ConfigError) as info:
        normalise_url(url, "postgres" if url.startswith("postgres") else "mysql", "url_env", Path("/"))
    assert message in info.value.message and "pw" not in info.value.message


# ================================================================ the reproductions


def _config(tmp: Path, source: dict, name: str = "rivet.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump({"source": source, "exports": [{
        "name": "items", "table": "items", "format": "parquet",
        "destination": {"type": "local", "path": "out"}}]}, sort_keys=False))
    return path


def _artifacts(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _state_rows(config: Path) -> str:
    db = config.parent / ".rivet_state.db"
    if not db.exists():
        return ""
    with sqlite3.connect(db) as conn:
        rows = [repr(r) for table in ("export_metrics", "run_journal")
                for r in conn.execute(f"SELECT * FROM {table}")]  # noqa: S608 - fixed names
    return "\n".join(rows)


def test_repro_a_password_with_a_space_in_url_env_is_never_printed_or_stored(tmp_path):
    config = _config(tmp_path, {"type": "postgres", "url_env": "RIVET_H20_URL",
                                "tuning": {"max_retries": 0}})
    env = {"RIVET_H20_URL": f"postgresql://u:Tok3n SPACEPW@127.0.0.1:{free_port()}/db"}
    runs = [cli("run", "-c", str(config), env=env), cli("--json-errors", "run", "-c", str(config), env=env),
            cli("doctor", "-c", str(config), env=env), cli("doctor", "--json", "-c", str(config), env=env),
            cli("metrics", "-c", str(config), env=env), cli("journal", "-c", str(config), "-e", "items", env=env)]
    assert [r.returncode for r in runs[:4]] == [2, 2, 2, 2]  # connection refused: transient
    assert "connection refused" in runs[2].stdout
    text = "\n".join(r.stdout + r.stderr for r in runs) + _state_rows(config)
    assert "REDACTED@127.0.0.1" in text  # the URL was quoted, masked
    assert "cannot connect" in runs[0].stderr
    leaked = [s for s in ("Tok3n", "SPACEPW") if s in text or s.encode() in _artifacts(tmp_path)]
    assert leaked == []


@pytest.fixture
def mysql_user(mysql_url: str) -> Iterator[tuple[str, str]]:
    """A MariaDB user of its own (the server checks its password) that may read the test
    database; (user, base url of the database without credentials)."""
    user = f"rv_{uuid.uuid4().hex[:10]}"
    mysql_exec(mysql_url, f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'initial-pw-0'",
               f"GRANT SELECT ON `{urllib.parse.urlsplit(mysql_url).path.lstrip('/')}`.* "
               f"TO '{user}'@'127.0.0.1'")
    db_exec(mysql_url, "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
            "INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    u = urllib.parse.urlsplit(mysql_url)
    yield user, f"127.0.0.1:{u.port}{u.path}"
    mysql_exec(mysql_url, f"DROP USER IF EXISTS '{user}'@'127.0.0.1'")


def _set_password(admin_url: str, user: str, password: str) -> None:
    import pymysql

    u = urllib.parse.urlsplit(admin_url)
    conn = pymysql.connect(host=u.hostname, port=u.port, user=urllib.parse.unquote(u.username or ""),
                           password=urllib.parse.unquote(u.password or ""), charset="utf8mb4",
                           autocommit=True, ssl_disabled=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"ALTER USER '{user}'@'127.0.0.1' IDENTIFIED BY %s", (password,))
    finally:
        conn.close()


def test_repro_an_unencoded_at_in_the_password_connects_and_never_leaks_a_piece(tmp_path, mysql_url,
                                                                                mysql_user):
    user, where = mysql_user
    _set_password(mysql_url, user, "AtPart1@AtPart2")
    config = _config(tmp_path, {"type": "mysql", "url_env": "RIVET_H20_URL"})
    result = cli("run", "-c", str(config), env={"RIVET_H20_URL": f"mysql://{user}:AtPart1@AtPart2@{where}"})
    assert result.returncode == 0, result.stderr  # the server accepted exactly AtPart1@AtPart2
    assert "rows:     3" in result.stderr
    blob = (result.stdout + result.stderr).encode() + _artifacts(tmp_path)
    assert [s for s in ("AtPart1", "AtPart2") if s.encode() in blob] == []


def test_repro_doctor_on_an_unclosed_ipv6_bracket_is_a_proper_failure(tmp_path):
    config = _config(tmp_path, {"type": "postgres", "url_env": "RIVET_H20_URL"})
    env = {"RIVET_H20_URL": "postgresql://u:pw@[::1/db"}
    for args in (("doctor",), ("doctor", "--json")):
        result = cli(*args, "-c", str(config), env=env)
        assert result.returncode == 1
        assert "internal error" not in result.stdout and "traceback" not in result.stdout
        assert "not a valid bracketed IPv6 address" in result.stdout
        assert "[::1]:5432" in result.stdout  # the fix
    run = cli("run", "-c", str(config), env=env)
    assert run.returncode == 1 and "not a valid bracketed IPv6 address" in run.stderr


def test_an_inline_url_with_a_bad_host_is_refused_at_load(tmp_path):
    config = _config(tmp_path, {"type": "postgres", "url": "postgresql://u:pw@[::1/db"})
    result = cli("check", "-c", str(config))
    assert result.returncode == 1
    assert "source.url: the host '[::1' is not a valid bracketed IPv6 address" in result.stderr


# ================================================================== the property test

#: Separators that change how a URL or a conninfo string is split, and escapes that decode.
_SPECIALS = list(" @:/#?%'\"\\&=+;,[]{}$!*`~^|<>") + ["\u00a0", "\u3000", "%20", "%41", "%zz",
                                                       "@@", "  ", "password=", "://"]
_PRINTABLE = st.characters(exclude_categories=("Cc", "Cs", "Co", "Cn", "Zl", "Zp", "Cf"))
_WORD = st.text(alphabet=_PRINTABLE, max_size=5).map(lambda t: MARKER + t)
_SEP = st.one_of(st.sampled_from(_SPECIALS), st.text(alphabet=_PRINTABLE, min_size=1, max_size=3))
passwords = st.lists(st.tuples(_SEP, _WORD), min_size=1, max_size=4).flatmap(
    lambda pairs: st.tuples(st.sampled_from(["", *_SPECIALS[:6]]), st.just(pairs)).map(
        lambda t: t[0] + MARKER + "".join(sep + word for sep, word in t[1])))
FORMS = ["raw_url", "encoded_url", "password_env"]

#: The shapes of the issue and their neighbours, always run (on top of the generated ones).
EXPLICIT = ["Tok3n SPACEPW" + MARKER, "AtPart1@AtPart2" + MARKER, MARKER + " @:/#?%'\"",
            f"{MARKER}@{MARKER}@{MARKER}", f" {MARKER}ünï 密码 {MARKER} ", f"{MARKER}%41%zz%",
            f"{MARKER}'\"\\'{MARKER}", f"password={MARKER} sig={MARKER}",
            f"{MARKER}://x:y@h/{MARKER}", f"{MARKER}\u00a0{MARKER}\u3000end"]


def _source(form: str, user: str, password: str, where: str) -> tuple[dict, dict[str, str], str]:
    """(source block, env, the password the server must get) for one way of writing it."""
    host_port, _, db = where.partition("/")
    host, _, port = host_port.partition(":")
    if form == "password_env":
        return ({"type": "mysql", "host": host, "port": int(port), "user": user, "database": db,
                 "password_env": "RIVET_H20_PW"}, {"RIVET_H20_PW": password}, password)
    if form == "encoded_url":
        url = f"mysql://{user}:{urllib.parse.quote(password, safe='')}@{where}"
        return {"type": "mysql", "url_env": "RIVET_H20_URL"}, {"RIVET_H20_URL": url}, password
    # raw: written as is; a %XX in it is a percent escape, as in any URL
    url = f"mysql://{user}:{password}@{where}"
    return ({"type": "mysql", "url_env": "RIVET_H20_URL"}, {"RIVET_H20_URL": url},
            urllib.parse.unquote(password))


@settings(max_examples=400, deadline=None, database=None)
@given(password=passwords, form=st.sampled_from(["raw_url", "encoded_url"]),
       scheme=st.sampled_from(["mysql", "mariadb", "postgresql", "postgres"]))
def test_every_generated_password_reaches_the_driver_intact_and_no_quoted_form_shows_a_piece(
        password, form, scheme):
    """The parser and the redactor over the whole password space, in microseconds per
    example (the end-to-end test below runs the CLI and the server on fewer of them): the URL
    the drivers read holds exactly the password, and neither the URL as written, nor the
    normalised one, nor an error text quoting them shows a piece of it."""
    source_type = "mysql" if scheme in ("mysql", "mariadb") else "postgres"
    encoded = form == "encoded_url"
    url = f"{scheme}://rv_user:{urllib.parse.quote(password, safe='') if encoded else password}@127.0.0.1:3306/db"
    actual = password if encoded else urllib.parse.unquote(password)
    with _fresh_registry():
        normalised = normalise_url(url, source_type, "url_env", Path("/"))
        parsed = urllib.parse.urlsplit(normalised)
        assert urllib.parse.unquote(parsed.password or "") == actual
        assert urllib.parse.unquote(parsed.username or "") == "rv_user" and parsed.port == 3306
        for text in (url, normalised, f"cannot connect to {url}: refused", f"driver: {normalised!r}",
                     json.dumps({"url": url}), actual, f'password "{actual}" rejected'):
            assert MARKER not in redact_secrets(text), (form, text)


def test_no_artifact_of_any_command_holds_a_piece_of_a_generated_password(tmp_path, mysql_url, mysql_user):
    """End to end, on the explicit shapes and 20 generated ones (the parser/redactor
    property above covers 400 per run without a server): ~1.5 s of CLI runs per example."""
    user, where = mysql_user
    dead = f"127.0.0.1:{free_port()}/{where.partition('/')[2]}"
    seen: list[tuple[str, str]] = []

    @settings(max_examples=20, deadline=None, database=None)
    @given(password=passwords, form=st.sampled_from(FORMS))
    @example(password=EXPLICIT[0], form="raw_url")
    @example(password=EXPLICIT[1], form="raw_url")
    @example(password=EXPLICIT[2], form="raw_url")
    @example(password=EXPLICIT[3], form="raw_url")
    @example(password=EXPLICIT[4], form="raw_url")
    @example(password=EXPLICIT[5], form="raw_url")
    @example(password=EXPLICIT[6], form="encoded_url")
    @example(password=EXPLICIT[7], form="raw_url")
    @example(password=EXPLICIT[8], form="raw_url")
    @example(password=EXPLICIT[9], form="password_env")
    @example(password=EXPLICIT[4], form="password_env")
    @example(password=EXPLICIT[2], form="encoded_url")
    def check(password: str, form: str) -> None:
        with _fresh_registry():  # each example proves itself: no mask left by an earlier one
            check_one(password, form)

    def check_one(password: str, form: str) -> None:
        seen.append((form, password))
        root = tmp_path / f"ex{len(seen)}"
        root.mkdir()
        source, env, actual = _source(form, user, password, where)
        _set_password(mysql_url, user, actual)
        config = _config(root, {**source, "tuning": {"max_retries": 0}})
        ok = cli("-vv", "run", "-c", str(config), env=env)
        assert ok.returncode == 0, ok.stderr  # the server got exactly this password
        bad_source, bad_env, _ = _source(form, user, password, dead)  # connection refused
        # a second config in the same directory: the same state store and destination
        bad = _config(root, {**bad_source, "tuning": {"max_retries": 0}}, "rivet-dead.yaml")
        failed = cli("-vv", "--json-errors", "run", "-c", str(bad), env=bad_env)
        assert failed.returncode == 2, failed.stderr
        doctor = cli("doctor", "--json", "-c", str(bad), env=bad_env)
        assert json.loads(doctor.stdout)["exit_code"] == 2
        listing = [cli("metrics", "-c", str(config), env=env),
                   cli("journal", "-c", str(config), "-e", "items", env=env)]
        assert "failed" in listing[0].stdout and "RunCompleted" in listing[1].stdout
        texts = "\n".join(r.stdout + r.stderr for r in (ok, failed, doctor, *listing))
        state = _state_rows(config)
        manifest = (root / "out" / "manifest.json").read_text()
        reports = [p.read_text() for p in root.rglob("summary.md")]
        assert len(reports) == 2 and '"status": "success"' in manifest and "failed" in state
        for name, blob in (("stdout/stderr", texts), ("state tables", state), ("manifest", manifest),
                           ("reports", "\n".join(reports))):
            assert MARKER not in blob, f"{name} holds a piece of the password ({form}): {blob[:2000]}"
        assert MARKER.encode() not in _artifacts(root)  # every file: state DB + WAL, parts, reports

    check()
    assert len({p for _, p in seen}) >= 25  # the explicit shapes plus generated ones really ran


@pytest.mark.parametrize("password", EXPLICIT)
def test_the_explicit_shapes_through_postgresql_leave_no_piece_anywhere(tmp_path, pg_url, password):
    """The PostgreSQL path (psycopg, binary COPY, the ADBC conninfo) with each explicit shape
    written raw into `url_env`. The test server trusts 127.0.0.1, so the password is not
    checked here (MariaDB above proves it arrives intact); what is checked is that the URL
    still parses (the run succeeds) and that no artifact of a success, a refused connection
    and `doctor` holds a piece of it."""
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY, name TEXT)",
            "INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    u = urllib.parse.urlsplit(pg_url)
    config = _config(tmp_path, {"type": "postgres", "url_env": "RIVET_H20_URL",
                                "tuning": {"max_retries": 0}})
    good = {"RIVET_H20_URL": f"postgresql://{u.username}:{password}@{u.hostname}:{u.port}{u.path}"}
    bad = {"RIVET_H20_URL": f"postgresql://{u.username}:{password}@127.0.0.1:{free_port()}{u.path}"}
    ok = cli("-vv", "run", "-c", str(config), env=good)
    assert ok.returncode == 0, ok.stderr
    failed = cli("-vv", "--json-errors", "run", "-c", str(config), env=bad)
    assert failed.returncode == 2 and "REDACTED@127.0.0.1" in failed.stderr
    doctor = cli("doctor", "-c", str(config), env=bad)
    assert doctor.returncode == 2 and "connection refused" in doctor.stdout
    text = "\n".join(r.stdout + r.stderr for r in (ok, failed, doctor)) + _state_rows(config)
    assert "failed" in _state_rows(config)
    assert MARKER not in text
    assert MARKER.encode() not in _artifacts(tmp_path)


def test_rivet_init_parses_the_url_like_a_config_and_leaks_nothing(tmp_path, mysql_url, mysql_user):
    """`rivet init --source-env` reads the URL without a config: the same parser (last `@`,
    re-encoding, registration) must apply, or a space / `@` in the password breaks it."""
    user, where = mysql_user
    password = f"In1t {MARKER}@{MARKER} x"
    _set_password(mysql_url, user, password)
    out = tmp_path / "gen" / "rivet.yaml"
    out.parent.mkdir()
    result = cli("init", "--source-env", "RIVET_H20_URL", "-o", str(out),
                 env={"RIVET_H20_URL": f"mysql://{user}:{password}@{where}"})
    assert result.returncode == 0, result.stderr  # the server accepted exactly this password
    assert "items" in yaml.safe_load(out.read_text())["exports"][0]["name"]
    dead = cli("init", "--source-env", "RIVET_H20_URL", "-o", str(tmp_path / "x.yaml"),
               env={"RIVET_H20_URL": f"mysql://{user}:{password}@127.0.0.1:{free_port()}/x"})
    assert dead.returncode == 2, dead.stderr
    blob = (result.stdout + result.stderr + dead.stdout + dead.stderr).encode() + _artifacts(tmp_path)
    assert MARKER.encode() not in blob


def test_rivet_init_on_postgresql_accepts_a_raw_password_with_spaces_and_at(tmp_path, pg_url):
    db_exec(pg_url, "CREATE TABLE items (id INT PRIMARY KEY)")
    u = urllib.parse.urlsplit(pg_url)
    url = f"postgresql://{u.username}:In1t {MARKER}@{MARKER}@{u.hostname}:{u.port}{u.path}"
    out = tmp_path / "rivet.yaml"
    result = cli("init", "--source-env", "RIVET_H20_URL", "-o", str(out), env={"RIVET_H20_URL": url})
    assert result.returncode == 0, result.stderr  # libpq alone refuses the spaces
    assert [e["name"] for e in yaml.safe_load(out.read_text())["exports"]] == ["items"]
    assert MARKER.encode() not in (result.stdout + result.stderr).encode() + _artifacts(tmp_path)


_HOSTS = ["[::1", "[::1]:1", "[zz]", "127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:abc", "127.0.0.1:1",
          "127.0.0.1:1,127.0.0.1:2", "", "[::1]]", "127.0.0.1: 1", "127.0.0.1:1?x", "]"]


@settings(max_examples=30, deadline=None, database=None)
@given(scheme=st.sampled_from(["postgresql", "postgres", "mysql", "mariadb"]),
       password=passwords, host=st.sampled_from(_HOSTS),
       tail=st.text(alphabet=st.sampled_from(list("/?#&=%@:[] dbx")), max_size=12))
def test_doctor_never_reports_an_internal_error_for_a_malformed_url(scheme, password, host, tail):
    """Item 11 beyond the reproduction: any userinfo, a broken or refusing host and a garbled
    path/query give a [FAIL] line that names the problem — never "internal error", never a
    piece of the password."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        config = _config(Path(tmp), {"type": "mysql" if scheme in ("mysql", "mariadb") else "postgres",
                                     "url_env": "RIVET_H20_URL", "tuning": {"max_retries": 0}})
        result = cli("doctor", "-c", str(config),
                     env={"RIVET_H20_URL": f"{scheme}://u:{password}@{host}{tail}"})
    out = result.stdout + result.stderr
    assert result.returncode in (1, 2), out
    assert "internal error" not in out and "Traceback" not in out
    assert any(line.startswith("[FAIL] source") for line in result.stdout.splitlines()), out
    assert MARKER not in out


def test_notifications_of_a_failed_run_carry_no_piece_of_any_shape(tmp_path, httpserver):
    """What is handed on: the webhook and Slack bodies of failed runs (a real HTTP server
    records them), one run per explicit shape, the URL raw in `url_env`."""
    bodies: list[bytes] = []

    def capture(request):  # noqa: ANN001, ANN202 - werkzeug request/response
        from werkzeug import Response

        bodies.append(request.get_data())
        return Response("ok", status=200)

    httpserver.expect_request("/hook", method="POST").respond_with_handler(capture)
    httpserver.expect_request("/slack", method="POST").respond_with_handler(capture)
    config = tmp_path / "rivet.yaml"
    config.write_text(yaml.safe_dump({
        "source": {"type": "postgres", "url_env": "RIVET_H20_URL", "tuning": {"max_retries": 0}},
        "exports": [{"name": "items", "table": "items", "format": "parquet",
                     "destination": {"type": "local", "path": "out"}}],
        "notifications": {"webhook": {"url": httpserver.url_for("/hook"), "on": ["failure"]},
                          "slack": {"webhook_url": httpserver.url_for("/slack"), "on": ["failure"]}}}))
    port = free_port()
    for password in EXPLICIT:
        result = cli("run", "-c", str(config),
                     env={"RIVET_H20_URL": f"postgresql://u:{password}@127.0.0.1:{port}/db"})
        assert result.returncode == 2, result.stderr
        assert MARKER not in result.stdout + result.stderr
    assert len(bodies) == 2 * len(EXPLICIT)
    assert all(b"REDACTED@127.0.0.1" in body for body in bodies)  # the error was in each body
    assert [body[:300] for body in bodies if MARKER.encode() in body] == []
