"""Turning `source:` into one connection URL, at connect time (docs/rivet-compat.md "Source URL").

Forms: inline `url`, `url_env` (env var holding the URL), `url_file` (file holding it,
relative to the config dir), or structured `host`/`port`/`user`/`password(_env)`/`database`.
Schemes are normalised (`postgres://`, `postgresql+psycopg://` → `postgresql://`;
`mysql+pymysql://`, `mariadb://` → `mysql://`), SQLite paths become absolute relative to
the config directory. Every password seen is registered for redaction; no error message
ever contains one.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from pathlib import Path
from typing import Protocol

from rivet_core.config.tls import TlsFields, apply_tls
from rivet_core.errors import ConfigError
from rivet_core.redact import register_secret


class SourceFields(Protocol):
    """What a connection URL is built from: the `source:` fields (config/models.py
    `SourceConfig`). A protocol, so models.py may call this module without an import back."""

    type: str
    url: str | None
    url_env: str | None
    url_file: str | None
    host: str | None
    port: int | None
    user: str | None
    password: str | None
    password_env: str | None
    database: str | None
    tls: TlsFields | None

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://(.*)$", re.DOTALL)

#: scheme family → canonical scheme and source.type
_FAMILIES: dict[str, tuple[str, str]] = {
    "postgres": ("postgresql", "postgres"),
    "postgresql": ("postgresql", "postgres"),
    "mysql": ("mysql", "mysql"),
    "mariadb": ("mysql", "mysql"),
    "sqlite": ("sqlite", "sqlite"),
}
DEFAULT_PORTS: dict[str, int] = {"postgres": 5432, "mysql": 3306}

#: The mark on a `type: sqlalchemy` source's resolved URL: every layer that opens a session
#: from the URL alone (`open_source(plan.source_url, …)`) then takes the generic SQLAlchemy
#: path, even for `postgresql://`, which unmarked means the native reader.
SQLALCHEMY_PREFIX = "sqlalchemy:"
#: SQLAlchemy backends whose URL names a local file (`duckdb:///rel.db`, like SQLite).
FILE_BACKENDS = frozenset({"sqlite", "duckdb"})


def sqlalchemy_backend(url: str) -> str:
    """The SQLAlchemy backend of a (marked or bare) SQLAlchemy URL: `duckdb`, `mssql`, …"""
    bare = url[len(SQLALCHEMY_PREFIX):] if url.startswith(SQLALCHEMY_PREFIX) else url
    return bare.split("://", 1)[0].split("+", 1)[0].lower()


def sqlalchemy_source_url(url: str, field: str, config_dir: Path) -> str:
    """A `type: sqlalchemy` URL, marked (`SQLALCHEMY_PREFIX`): a file backend's relative
    path anchored at the config dir (as for SQLite), a server URL's user and password
    encoded once (`_reencode`) and registered for redaction."""
    url = url.strip()
    match = _SCHEME.match(url)
    if not match:
        raise ConfigError(
            f"source.{field}: not a SQLAlchemy URL — write dialect[+driver]://…, e.g. "
            "duckdb:///data/shop.duckdb or mssql+pyodbc://user@host/db"
        )
    scheme, rest = match.group(1).lower(), match.group(2)
    if sqlalchemy_backend(url) in FILE_BACKENDS:
        _register_url_secrets(url)
        return SQLALCHEMY_PREFIX + scheme + _sqlite_url(rest, config_dir, f"source.{field}")[len("sqlite"):]
    return SQLALCHEMY_PREFIX + _reencode(f"{scheme}://{rest}", field)


def url_scheme_family(url: str) -> tuple[str, str] | None:
    """(canonical scheme, source type) for a URL, or None when the scheme is unknown."""
    match = _SCHEME.match(url.strip())
    if not match:
        return None
    base = match.group(1).lower().split("+", 1)[0]
    return _FAMILIES.get(base)


def split_userinfo(url: str) -> tuple[str, str | None, str] | None:
    """(`scheme://`, raw userinfo or None, the rest from the host on) of a server URL.

    The one rule every part of rivet uses, the redactor too: the userinfo ends at the LAST
    `@` of the URL, because passwords may contain `@ / ? # : %` and whitespace unencoded
    (`u:AtPart1@AtPart2@host` is user `u`, password `AtPart1@AtPart2`). A literal `@`
    after the host (in the query) must therefore be written `%40`. None: not a URL.
    """
    match = _SCHEME.match(url)
    if not match:
        return None
    scheme, rest = match.group(1) + "://", match.group(2)
    userinfo, at, host_part = rest.rpartition("@")
    return (scheme, userinfo, host_part) if at else (scheme, None, rest)


def url_database(url: str) -> str | None:
    """The database name of a server URL (`postgresql://u:p/w@db:5432/shop?x=1` → `shop`),
    by the same userinfo rule as `split_userinfo`; None when it names none (or is not one)."""
    parts = split_userinfo(url.strip())
    if parts is None:
        return None
    path = parts[2].partition("/")[2].split("?", 1)[0].split("#", 1)[0].strip("/")
    return urllib.parse.unquote(path.split("/", 1)[0]) or None


def database_named_by(source_type: str, url: str) -> str | None:
    """The database a source URL names: a SQLite file's stem (`sqlite:///data/shop.db` →
    `shop`), else the server URL's database (`url_database`)."""
    if url.startswith(SQLALCHEMY_PREFIX):
        source_type, url = sqlalchemy_backend(url), url[len(SQLALCHEMY_PREFIX):]
    if source_type in FILE_BACKENDS:
        from pathlib import PurePosixPath

        return PurePosixPath(url.split("///", 1)[-1]).stem or None
    return url_database(url)


def _user_password(userinfo: str) -> tuple[str, str | None]:
    """Raw (user, password) of a userinfo: the user ends at its first `:`."""
    user, colon, password = userinfo.partition(":")
    return user, (password if colon else None)


def inline_url_password(url: str) -> str | None:
    """The password in a URL's userinfo (raw, as written), if any — see `split_userinfo`."""
    parts = split_userinfo(url.strip())
    if parts is None or parts[1] is None:
        return None
    return _user_password(parts[1])[1] or None


def _register_url_secrets(url: str) -> None:
    password = inline_url_password(url)
    if password:
        register_secret(password)  # also its decoded and encoded forms


def scheme_problem(url: str, source_type: str, field: str) -> str | None:
    """Why `url` cannot be used for `source.type`, or None. Never echoes the URL."""
    family = url_scheme_family(url)
    if family is None:
        shown = url.split("://", 1)[0] if "://" in url else "(none)"
        return (
            f"source.{field}: unsupported URL scheme '{shown[:40]}' — expected postgresql://, "
            "mysql:// or sqlite:///path.db"
        )
    if family[1] != source_type:
        return (
            f"source.{field}: URL scheme '{family[0]}' does not match source.type "
            f"'{source_type}' — change one of them"
        )
    return None


def _sqlite_url(rest: str, config_dir: Path, field: str = "source.url") -> str:
    """`rest` is everything after `sqlite://`; relative file paths hang off config_dir.
    Also the Iceberg SQL catalog's URL (`field` names it in the error), so a relative
    database file means the same thing in both places."""
    if rest in ("", "/", "/:memory:"):
        return "sqlite://" + rest
    path_part, sep, query = rest.partition("?")
    if not path_part.startswith("/"):
        raise ConfigError(
            f"{field}: a SQLite URL needs three slashes before a relative path "
            "(sqlite:///data/app.db) or four before an absolute one (sqlite:////abs/app.db)"
        )
    file_path = Path(path_part[1:]).expanduser()
    if not file_path.is_absolute():
        file_path = config_dir / file_path
    return f"sqlite:///{os.path.normpath(file_path)}" + (sep + query if sep else "")


def _host_problem(host_part: str, field: str) -> str | None:
    """Why the host/port of a server URL cannot be parsed (never echoes the userinfo)."""
    authority = re.split(r"[/?#]", host_part, maxsplit=1)[0]
    shown = authority if len(authority) <= 80 else authority[:80] + "…"
    if re.search(r"\s", authority):
        return (f"source.{field}: the host '{shown}' contains whitespace — remove it (a space "
                "in the password is fine: everything up to the last '@' is the password)")
    for host in authority.split(","):  # libpq: host1:port1,host2:port2
        try:
            port = urllib.parse.urlsplit(f"x://{host}").port
        except ValueError as exc:
            if "[" in host or "]" in host:
                return (f"source.{field}: the host '{shown}' is not a valid bracketed IPv6 "
                        f"address ({exc}) — write it as [::1] or [::1]:5432, with both brackets")
            return (f"source.{field}: the port in '{shown}' is not a number from 1 to 65535 "
                    f"({exc}) — write host:port, e.g. db.internal:5432")
        if port == 0:
            return (f"source.{field}: the port in '{shown}' is 0 — write host:port with a port "
                    "from 1 to 65535, e.g. db.internal:5432")
    return None


def url_host_problem(url: str, field: str) -> str | None:
    """Why the host/port of a postgresql:// or mysql:// URL cannot be parsed, or None."""
    family = url_scheme_family(url)
    parts = split_userinfo(url.strip())
    if family is None or family[1] == "sqlite" or parts is None:
        return None
    return _host_problem(parts[2], field)


def _reencode(url: str, field: str) -> str:
    """A server URL whose user and password are percent-encoded exactly once, so every
    driver reads the same user and password (libpq splits a raw userinfo at its FIRST
    `@` and refuses spaces; urllib stops it at `/ ? #`). Registers every form of the
    password for redaction before anything can quote it; ConfigError on a bad host."""
    parts = split_userinfo(url)
    assert parts is not None  # scheme_problem accepted it
    scheme, userinfo, host_part = parts
    _, _, query = host_part.partition("?")
    for key, value in urllib.parse.parse_qsl(query.partition("#")[0], keep_blank_values=True):
        if key.lower() in ("password", "passwd", "pwd", "sslpassword"):
            register_secret(value)  # `?password=…` (libpq accepts it): masked like the userinfo
    problem = _host_problem(host_part, field)
    if userinfo is None:
        if problem:
            raise ConfigError(problem)
        return url
    user, password = _user_password(userinfo)
    quote = lambda s: urllib.parse.quote(urllib.parse.unquote(s), safe="")  # noqa: E731
    if password is not None:
        register_secret(password)
    if problem:
        raise ConfigError(problem)
    rebuilt = quote(user) + ("" if password is None else ":" + quote(password))
    if password:
        register_secret(quote(password))
    return f"{scheme}{rebuilt}@{host_part}"


def normalise_url(url: str, source_type: str, field: str, config_dir: Path) -> str:
    """Canonical scheme, user/password re-encoded (`_reencode`), SQLite path made absolute;
    ConfigError on a wrong scheme or an unparsable host."""
    url = url.strip()
    problem = scheme_problem(url, source_type, field)
    if problem:
        raise ConfigError(problem)
    match = _SCHEME.match(url)
    assert match is not None  # scheme_problem accepted it
    canonical = _FAMILIES[match.group(1).lower().split("+", 1)[0]][0]
    rest = match.group(2)
    if canonical == "sqlite":
        _register_url_secrets(url)
        return _sqlite_url(rest, config_dir)
    return _reencode(f"{canonical}://{rest}", field)


def _env(var: str, field: str) -> str:
    value = os.environ.get(var)
    if value is None or value == "":
        raise ConfigError(f"env var '{var}' is not set (referenced by {field}) — export {var}=...")
    return value


def _read_url_file(url_file: str, config_dir: Path) -> str:
    path = Path(url_file).expanduser()
    if not path.is_absolute():
        path = config_dir / path
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ConfigError(
            f"cannot read url_file '{path}': {reason} — create it with the connection URL "
            "as its only content, or use url_env"
        ) from None
    if not text:
        raise ConfigError(f"cannot read url_file '{path}': the file is empty — put the URL in it")
    return text


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def resolve_source_url(source: SourceFields, config_dir: Path) -> str:
    """Build the connection URL for `source` (see module docstring), with `source.tls`
    written into it (`rivet_core.config.tls`): every connection starts from this URL, so
    no code path can connect without the configured TLS."""
    return apply_tls(_resolve_plain_url(source, config_dir), source.type, source.tls, config_dir)


def _resolve_plain_url(source: SourceFields, config_dir: Path) -> str:
    """The URL from url / url_env / url_file / the structured fields, before TLS."""
    if source.type == "sqlalchemy":  # validate.py requires url, url_env or url_file
        raw = source.url or (source.url_env and _env(source.url_env, "url_env")) or _read_url_file(
            source.url_file or "", config_dir)
        return sqlalchemy_source_url(raw, "url_env" if source.url_env else "url", config_dir)
    if source.url is not None:
        return normalise_url(source.url, source.type, "url", config_dir)
    if source.url_env is not None:
        return normalise_url(_env(source.url_env, "url_env"), source.type, "url_env", config_dir)
    if source.url_file is not None:
        return normalise_url(
            _read_url_file(source.url_file, config_dir), source.type, "url_file", config_dir
        )
    if source.type == "sqlite":
        if not source.database:
            raise ConfigError(
                "source: no connection method configured — for sqlite set "
                "database: path/to/file.db or url: sqlite:///path/to/file.db"
            )
        db = Path(source.database).expanduser()
        if not db.is_absolute():
            db = config_dir / db
        return f"sqlite:///{os.path.normpath(db)}"
    for field in ("host", "user", "database"):
        if not getattr(source, field):
            raise ConfigError(
                f"source: structured config is missing '{field}' — set it, or use url_env"
            )
    password = source.password
    if source.password_env is not None:
        password = _env(source.password_env, "password_env")
    if password:
        register_secret(password)
    quote = lambda s: urllib.parse.quote(s, safe="")  # noqa: E731 - unreserved -._~ kept
    userinfo = quote(source.user or "")
    if password:
        userinfo += ":" + quote(password)
        register_secret(quote(password))
    port = source.port or DEFAULT_PORTS[source.type]
    scheme = "postgresql" if source.type == "postgres" else "mysql"
    return f"{scheme}://{userinfo}@{_host_for_url(source.host or '')}:{port}/{quote(source.database or '')}"


def sqlite_url_beside(url: str, config_dir: Path, field: str) -> str:
    """`url` with a relative SQLite file anchored at `config_dir` (`_sqlite_url`); any
    other URL as it is."""
    return _sqlite_url(url[len("sqlite://"):], config_dir, field) if url.startswith("sqlite://") else url

