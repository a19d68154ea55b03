"""Credential redaction: the one chokepoint every user-visible string passes through.

Two layers, so that no URL shape can carry a secret past it:

1. **Registered secrets** (`register_secret`): every password the engine resolves (from a
   URL's userinfo — raw *and* decoded —, `password`/`password_env`, S3 secret keys, …) is
   remembered together with the forms it can take in a message: percent-encoded, JSON- and
   repr-escaped, libpq-conninfo-escaped. A password that contains whitespace or `@` also
   registers its pieces of 6+ characters, because a driver that splits it there quotes a
   piece (`invalid connection option "SPACEPW"`, `host 'AtPart2@db'`). Registered strings
   are masked wherever they appear, URL or not.
2. **Shapes**, for text whose secret was never registered: `scheme://userinfo@` whose
   userinfo contains a `:` becomes `scheme://REDACTED@`. The userinfo ends at the LAST `@`
   before whitespace (passwords may contain `/ ? # @ :` — the same rule the URL parser of
   `rivet_core.config.source_url` uses); a `scheme://user:…@host` whose password contains
   whitespace is masked up to the last `@` on the line that is followed by a host. Values
   of secret parameters (`password=`, `PGPASSWORD=`, `secret=`, `token=`, `sig=`,
   `X-Amz-Signature=`) are masked, quoted (`password='a b'`, libpq style) or not.

`user@host` without a password is untouched. The function is idempotent.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse

_URL_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s]*)@")
#: `scheme://user:pass word@host` — a password with whitespace (layer 2's second shape).
_URL_USERINFO_SPACED = re.compile(
    r"([A-Za-z][A-Za-z0-9+.\-]*://)([^\s:/@]*:(?!\d+(?:[/?\s]|$))[^\r\n]*)@(?=[A-Za-z0-9_\[])"
)
_SECRET_KEY = r"\w*(?:password|passwd|pwd|secret|token)|sig|x-amz-signature"
_QUERY_SECRET = re.compile(
    rf"(?i)\b({_SECRET_KEY})(\s*=\s*)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^&\s'\"]+)"
)

#: A registered secret (or a piece of one) shorter than this is not masked as a plain
#: string: it would blank out ordinary words. URL shapes still hide short passwords.
MIN_SECRET_LEN = 4
_MIN_PIECE_LEN = 6

#: Userinfo that is a documentation placeholder, not a credential (error messages show the
#: expected URL shape with it).
_PLACEHOLDERS = frozenset({"user:password", "user:pw", "user:pass", "USER:PASSWORD"})

_registered: set[str] = set()
_lock = threading.Lock()


def secret_forms(value: str) -> set[str]:
    """`value` and every form a message can quote it in: percent-decoded / -encoded (also
    `+` for spaces), JSON-escaped (ASCII and not), repr-escaped, libpq-conninfo-escaped."""
    plain = urllib.parse.unquote(value)
    forms = {value, plain}
    for text in (value, plain):
        forms.update({
            urllib.parse.quote(text, safe=""),
            urllib.parse.quote(text),
            urllib.parse.quote_plus(text, safe=""),
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            repr(text)[1:-1],
            text.replace("\\", "\\\\").replace("'", "\\'"),
        })
    return forms


def secret_pieces(value: str) -> set[str]:
    """The pieces of 6+ characters a driver could quote after splitting `value` at
    whitespace or `@` (nothing when the value has neither)."""
    if not re.search(r"[\s@]", value):
        return set()
    return {p for p in re.split(r"[\s@]+", value) if len(p) >= _MIN_PIECE_LEN}


def register_secret(value: str | None) -> None:
    """Remember a secret so that `redact_secrets` masks it (in all its forms) wherever it
    appears."""
    if not value:
        return
    forms = secret_forms(value)
    for form in list(forms):
        forms |= secret_pieces(form)
    with _lock:
        _registered.update(f for f in forms if len(f) >= MIN_SECRET_LEN)


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    # rest runs up to the LAST '@' before whitespace (greedy [^\s]* then '@'); a userinfo
    # a registered secret was masked in (`REDACTED%20x`) is masked whole.
    if rest in _PLACEHOLDERS:  # `mysql://user:password@host` in a message's example
        return match.group(0)
    if (":" in rest or "REDACTED" in rest) and rest != "REDACTED":
        return f"{scheme}REDACTED@"
    return match.group(0)


def _mask_spaced_userinfo(match: re.Match[str]) -> str:
    # only a userinfo with whitespace: one without is the first shape's decision
    if not re.search(r"\s", match.group(2)):
        return match.group(0)
    return f"{match.group(1)}REDACTED@"


def _mask_query(match: re.Match[str]) -> str:
    value = match.group(3)
    if value.strip("'\"") == "REDACTED":
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}REDACTED"


def _mask_registered(s: str) -> str:
    """Every stretch of `s` covered by occurrences of registered secrets becomes one
    REDACTED. Overlapping secrets (a password and a piece of it, two encodings) are merged
    first, so masking one can never leave the rest of another in the text."""
    with _lock:
        secrets = [secret for secret in _registered if secret in s]
    if not secrets:
        return s
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        start = s.find(secret)
        while start >= 0:
            spans.append((start, start + len(secret)))
            start = s.find(secret, start + 1)
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_start, cur_end = spans[0]
    for start, end in spans[1:]:
        if start <= cur_end:
            cur_end = max(cur_end, end)
            continue
        out += [s[pos:cur_start], "REDACTED"]
        pos, (cur_start, cur_end) = cur_end, (start, end)
    out += [s[pos:cur_start], "REDACTED", s[cur_end:]]
    return "".join(out)


def redact_secrets(text: object) -> str:
    """Return `text` as a string with every credential masked."""
    s = _mask_registered(str(text))
    s = _URL_USERINFO.sub(_mask_userinfo, s)
    s = _URL_USERINFO_SPACED.sub(_mask_spaced_userinfo, s)
    s = _QUERY_SECRET.sub(_mask_query, s)
    return s


def redact_url(url: str) -> str:
    """Redact a single connection URL (also hides a password-less userinfo's password part)."""
    return redact_secrets(url)
