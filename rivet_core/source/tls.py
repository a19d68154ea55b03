"""The TLS parameters of a source URL → driver settings, and TLS failures told apart.

`rivet_core/config/tls.py` writes `source.tls` into the connection URL at resolve time;
this module reads the URL's MySQL parameters back into the `ssl.SSLContext` PyMySQL needs
(libpq reads PostgreSQL's `sslmode`/`sslrootcert` itself) and recognises a failed
certificate or host-name check in a driver error, so it is reported as such.
"""

from __future__ import annotations

import ssl
import urllib.parse
from pathlib import Path

from rivet_core.config.tls import MYSQL_SSL_MODES, same_value
from rivet_core.errors import ConfigError


def mysql_ssl_context(query: str) -> tuple[str, ssl.SSLContext | None]:
    """(`ssl-mode`, the SSLContext PyMySQL needs or None) from a MySQL URL's query string.

    No `ssl-mode` and no `ssl-ca` is `preferred`, PyMySQL's behaviour before TLS was
    configurable; a lone `ssl-ca` means `verify_identity` (a CA only makes sense to verify).

    A context built here rather than PyMySQL's `ssl_*` keywords because `required` needs
    encryption *without* verification and `verify_ca` verification without the host-name
    check — combinations PyMySQL's keyword form cannot express exactly. That PyMySQL
    quietly stays plaintext when the server offers no TLS is handled by `mysql_connect`.
    """
    params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    ca = params.get("ssl-ca") or None
    raw_mode = params.get("ssl-mode")
    if raw_mode is None:
        mode = "verify_identity" if ca else "preferred"
    else:
        mode = same_value(raw_mode)
        if mode not in MYSQL_SSL_MODES:
            raise ConfigError(
                f"ssl-mode={raw_mode} in the source URL is not a MySQL TLS mode — use one of "
                + ", ".join(sorted(MYSQL_SSL_MODES))
            )
    if mode in ("disabled", "preferred"):
        return mode, None  # preferred = PyMySQL's own default (TLS when the server offers it)
    if ca and not Path(ca).is_file():
        raise ConfigError(f"ssl-ca in the source URL: file not found: '{ca}'")
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if mode == "required":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return mode, ctx
    ctx.check_hostname = mode == "verify_identity"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if ca:
        ctx.load_verify_locations(cafile=ca)
    return mode, ctx


def is_tls_verify_failure(exc: BaseException) -> bool:
    """Whether a driver error is a failed certificate / host-name check (anywhere in the
    exception chain), so it is reported as such — and not retried as a network blip."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        text = str(seen).lower()
        if "certificate verify failed" in text or "certificate_verify_failed" in text \
                or "does not match host name" in text or "hostname mismatch" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False
