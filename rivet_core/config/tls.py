"""`source.tls` → the connection URL (`apply_tls`, called by source_url.py at resolve time).

Why the URL: every code path that reads the source (export pipeline, chunk workers in
child processes, plan, doctor, introspection, `check`) gets its connection target from
`SourceConfig.resolve_url`, and every connection is then made by one helper per engine
(`postgres.pg_connect`, `mysql.mysql_connect`). Writing the TLS settings into that URL at
resolve time means no path can open a connection without them, and no plan or session
signature had to grow a second "TLS" argument.

Parameters written (and honoured when a user writes them in the URL themselves):

- PostgreSQL: libpq's own `sslmode` and `sslrootcert` — psycopg passes them to libpq
  unchanged. `verify-full` without a `ca_file` uses `sslrootcert=system` (the OS trust
  store), like the MySQL side; `verify-ca` without one keeps libpq's default
  (`~/.postgresql/root.crt`), because libpq refuses `system` for `verify-ca`.
- MySQL/MariaDB: `ssl-mode` (`disabled`, `preferred`, `required`, `verify_ca`,
  `verify_identity` — the MySQL client's names, case-insensitive) and `ssl-ca`.
  `rivet_core/source/tls.py` `mysql_ssl_context` turns them into the `ssl.SSLContext`
  PyMySQL is given.

When both `source.tls` and the URL set the same thing to different values the config is
rejected (`ConfigError`) instead of silently picking one: a URL written for one security
level and a tls block written for another is a mistake worth stopping for. Equal values,
or a URL setting the tls block leaves open (e.g. a URL `sslrootcert` with no `ca_file`),
are fine.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Protocol

from rivet_core.errors import ConfigError


class TlsFields(Protocol):
    """What `apply_tls` reads of `source.tls` (config/models.py `TlsConfig`); a protocol, so
    this module, which models.py reaches through source_url.py, never imports models.py."""

    mode: str
    ca_file: str | None
    accept_invalid_certs: bool
    accept_invalid_hostnames: bool


#: source.tls.mode → MySQL client `ssl-mode` name.
_MYSQL_MODES = {
    "disable": "disabled", "require": "required",
    "verify-ca": "verify_ca", "verify-full": "verify_identity",
}
MYSQL_SSL_MODES = frozenset({"disabled", "preferred", "required", "verify_ca", "verify_identity"})


def effective_mode(tls: TlsFields) -> str:
    """The mode after the danger knobs: they are only allowed without an explicit enforced
    mode (prescan rejects the contradiction), so here they weaken the default verify-full —
    `accept_invalid_certs` to `require` (encrypted, unverified), `accept_invalid_hostnames`
    to `verify-ca` (chain checked, name not)."""
    if tls.mode == "disable":
        return "disable"
    if tls.accept_invalid_certs:
        return "require"
    if tls.accept_invalid_hostnames and tls.mode == "verify-full":
        return "verify-ca"
    return tls.mode


def resolve_ca_file(ca_file: str, config_dir: Path) -> str:
    """Absolute path of `ca_file` (relative to the config directory, like every config path);
    a missing or unreadable file is a ConfigError naming the field and the path, so the
    failure is not a driver message about a handshake."""
    path = Path(ca_file).expanduser()
    if not path.is_absolute():
        path = config_dir / path
    if not path.is_file():
        raise ConfigError(
            f"source.tls.ca_file: file not found: '{path}' — point it at the PEM file of the CA "
            "that signed the server certificate (relative paths are relative to rivet.yaml)"
        )
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"source.tls.ca_file: cannot read '{path}': {exc.strerror}") from None
    return str(path)


def _merge(query: list[tuple[str, str]], key: str, value: str, field: str,
           *, same: bool) -> list[tuple[str, str]]:
    """Add `key=value`, or keep the URL's equal setting; a different one is a ConfigError."""
    existing = [v for k, v in query if k == key]
    if not existing:
        return [*query, (key, value)]
    norm = same_value if same else str.strip
    if all(norm(v) == norm(value) for v in existing):
        return query
    raise ConfigError(
        f"source.tls.{field} ({value}) conflicts with {key}={existing[0]} in the source URL — "
        f"set TLS in one place: remove {key} from the URL or the tls field"
    )


def same_value(value: str) -> str:
    """MySQL mode names compare case- and dash/underscore-insensitively."""
    return value.strip().lower().replace("-", "_")


def apply_tls(url: str, source_type: str, tls: TlsFields | None, config_dir: Path) -> str:
    """`url` with `source.tls` written into its query (module docstring). No tls block, or a
    SQLite source: the URL unchanged (libpq's default `sslmode=prefer` still applies to
    PostgreSQL; MySQL connects without TLS unless the URL asks for it)."""
    if tls is None or source_type not in ("postgres", "mysql"):
        return url
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    mode = effective_mode(tls)
    ca = resolve_ca_file(tls.ca_file, config_dir) if tls.ca_file and mode != "disable" else None
    if source_type == "postgres":
        query = _merge(query, "sslmode", mode, "mode", same=False)
        if ca:
            query = _merge(query, "sslrootcert", ca, "ca_file", same=False)
        elif mode == "verify-full" and not any(k == "sslrootcert" for k, _ in query):
            query.append(("sslrootcert", "system"))
    else:
        query = _merge(query, "ssl-mode", _MYSQL_MODES[mode], "mode", same=True)
        if ca:
            query = _merge(query, "ssl-ca", ca, "ca_file", same=False)
    # %20, never "+", for spaces: libpq does not decode "+" (e.g. `options=-c%20x=y` must survive).
    encoded = urllib.parse.urlencode(query, safe="/:", quote_via=urllib.parse.quote)
    return urllib.parse.urlunsplit(parts._replace(query=encoded))
