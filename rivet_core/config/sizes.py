"""`max_file_size` parsing: a number plus an optional unit, in binary (1024) units.

Accepted (case-insensitive): ``1024``, ``512B``, ``64KB``, ``1.5 MB``, ``2GB``. A bare number
is bytes. The result must be at least one byte. Decimal arithmetic keeps huge or
fractional inputs exact and never overflows a float.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rivet_core.errors import ConfigError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([kmg]?b)?\s*$", re.IGNORECASE)
UNITS: dict[str, int] = {"": 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}


def parse_size(text: str | int) -> int:
    """Parse a size like ``"512MB"`` into bytes; raise ConfigError on nonsense or ≤ 0."""
    raw = str(text)
    match = _SIZE.match(raw)
    if match is None or isinstance(text, bool):
        raise ConfigError(
            f"invalid max_file_size '{raw}' — use a positive number with an optional unit "
            "B, KB, MB or GB (binary units), e.g. '512MB' or '1.5GB'"
        )
    try:
        number = Decimal(match.group(1))
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only decimals
        raise ConfigError(f"invalid max_file_size '{raw}'") from exc
    size = int(number * UNITS[(match.group(2) or "").lower()])
    if size <= 0:
        raise ConfigError(
            f"invalid max_file_size '{raw}' — the size must be at least 1 byte, e.g. '256MB'"
        )
    return size
