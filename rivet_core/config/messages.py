"""Formatting helpers shared by every stage: YAML locations and combined error lists."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def location(loc: Sequence[Any]) -> str:
    """`('exports', 0, 'destination')` → `exports[0].destination`; `()` → `top level`."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{str(part)[:40]!r}]"
    return out or "top level"


def combine(errors: Sequence[str], what: str = "the config") -> str:
    """One message: the error itself, or a numbered list when there are several."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return unique[0]
    lines = [f"{len(unique)} problems in {what}:"]
    for number, error in enumerate(unique, start=1):
        first, *rest = error.splitlines() or [""]
        lines.append(f"  {number}. {first}")
        lines.extend(f"     {line}" for line in rest)
    return "\n".join(lines)


def describe_value(value: Any) -> str:
    """A short, safe description of a YAML value for an error message."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int | float):
        return str(getattr(value, "raw", value))[:60]
    text = str(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"'{text}'"


class Problem(str):
    """An error message that also carries a stable error code (e.g. RIVET_CONFIG_NO_EXPORTS)."""

    code: str | None

    def __new__(cls, text: str, code: str | None = None) -> Problem:
        obj = super().__new__(cls, text)
        obj.code = code
        return obj


def code_of(errors: Sequence[str]) -> str | None:
    """The code to attach to a raised error: only when exactly one coded problem is reported."""
    unique = list(dict.fromkeys(errors))
    if len(unique) == 1:
        return getattr(errors[0], "code", None)
    return None
