"""`Str`: a string field of `rivet.yaml` that also accepts a YAML number written without quotes.

Shared by the core models (models.py) and the integration blocks' models (blocks.py), so a
block's string fields read `schedule: 0300`-style values the way the core's do.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator


def scalar_to_str(value: Any) -> Any:
    """YAML numbers become their source text in string fields (serde_yaml does the same)."""
    if isinstance(value, bool):
        return value
    raw = getattr(value, "raw", None)
    if isinstance(raw, str):
        return raw
    if isinstance(value, int | float):
        return str(value)
    return value


#: A string field that also accepts a YAML number written without quotes.
Str = Annotated[str, BeforeValidator(scalar_to_str)]

__all__ = ["Str", "scalar_to_str"]
