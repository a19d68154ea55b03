"""Credential redaction: the one chokepoint every user-visible string passes through.

Rule (reference state-and-trust §8): any `scheme://userinfo@` whose userinfo contains a
`:` becomes `scheme://REDACTED@`. The userinfo ends at the LAST `@` before whitespace,
because passwords may contain `/ ? # @ :`. `user@host` without a password is untouched.
The function is idempotent. We additionally mask the values of well-known secret
query parameters (`password=`, `secret=`, `token=`) and any literal strings registered
with `register_secret` (passwords read from `password_env`, S3 secret keys), so a
secret that appears outside a URL is still hidden.
"""

from __future__ import annotations

import re
import threading

_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s]*)@")
_QUERY_SECRET = re.compile(r"(?i)\b(password|passwd|pwd|secret|token|sig|x-amz-signature)=([^&\s'\"]+)")

_registered: set[str] = set()
_lock = threading.Lock()


def register_secret(value: str | None) -> None:
    """Remember a secret value so that `redact_secrets` masks it wherever it appears."""
    if value and len(value) >= 4:
        with _lock:
            _registered.add(value)


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    # rest runs up to the LAST '@' before whitespace (greedy [^\s]* then '@').
    if ":" in rest and rest != "REDACTED":
        return f"{scheme}REDACTED@"
    return match.group(0)


def redact_secrets(text: object) -> str:
    """Return `text` as a string with every credential masked."""
    s = str(text)
    s = _URL_USERINFO.sub(_mask_userinfo, s)
    s = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}=REDACTED", s)
    with _lock:
        secrets = sorted(_registered, key=len, reverse=True)
    for secret in secrets:
        if secret in s:
            s = s.replace(secret, "REDACTED")
    return s


def redact_url(url: str) -> str:
    """Redact a single connection URL (also hides a password-less userinfo's password part)."""
    return redact_secrets(url)
