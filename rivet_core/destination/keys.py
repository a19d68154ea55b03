"""Key safety for every destination operation (docs/rivet-compat.md "Security": reject, never clamp).

A *key* is a `/`-separated path relative to the destination root (the local directory or
the S3 `bucket/prefix/`). Keys reach us from part-file names, manifest paths read back from
the destination (hostile input) and quarantine targets, so every `Destination` method
passes its keys through `check_key` before touching anything. A bad key is a bug or an
attack, never something to "fix up": we raise `DestinationError` and write nothing.
"""

from __future__ import annotations

import re

from rivet_core.destination.errors import destination_error

_DRIVE = re.compile(r"^[A-Za-z]:")


def _problem(key: str) -> str | None:
    """Return why `key` is unsafe, or None when it is a plain relative key."""
    if not key:
        return "it is empty"
    if "\x00" in key:
        return "it contains a NUL byte"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in key):
        return "it contains a control character"
    if "\\" in key:
        return "it contains a backslash"
    if key.startswith("/"):
        return "it is absolute"
    if _DRIVE.match(key):
        return "it starts with a drive letter"
    parts = key.split("/")
    if any(p == ".." for p in parts):
        return "it has a '..' component"
    if any(p == "." for p in parts):
        return "it has a '.' component"
    if any(p == "" for p in parts):
        return "it has an empty component ('//' or a trailing '/')"
    return None


def check_key(key: object) -> str:
    """Validate a destination key and return it unchanged; raise `DestinationError` if unsafe.

    Rejected: empty keys, absolute keys, drive letters, `..`/`.`/empty components,
    backslashes, NUL and other control characters (they make log lines and terminal output
    lie about what was written).
    """
    if not isinstance(key, str):
        raise destination_error(f"destination key must be a string, got {type(key).__name__}")
    why = _problem(key)
    if why is not None:
        raise destination_error(
            f"unsafe destination key {key!r}: {why} — keys must be relative paths without "
            f"'..', backslashes or control characters"
        )
    return key


def check_list_prefix(prefix: object) -> str:
    """Validate a `list()` prefix: "" (everything) or a safe key, optionally ending in "/"."""
    if prefix == "":
        return ""
    if not isinstance(prefix, str):
        raise destination_error(f"list prefix must be a string, got {type(prefix).__name__}")
    check_key(prefix[:-1] if prefix.endswith("/") else prefix)
    return prefix


def normalize_prefix(prefix: str | None) -> str:
    """Normalise an S3 key prefix: "" or safe components ending with exactly one "/".

    Leading slashes are dropped (`/exports/x` and `exports/x/` mean the same prefix to a
    user); anything else unsafe is rejected like a key.
    """
    p = (prefix or "").lstrip("/")
    if not p:
        return ""
    p = p.rstrip("/")
    check_key(p)
    return p + "/"
