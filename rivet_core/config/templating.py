"""Destination path templating: `{date}`, `{export}`, `{table}` in `path` / `prefix`.

docs/rivet-compat.md "File names and run ids": tokens expand at plan build in UTC. `{run_id}` is
kept verbatim (only `rivet validate --run-id` fills it), and so is `{partition}` until a
`partition_by` run renders it per bucket (rivet_core/pipeline/buckets/run.py; config/partition_by.py
requires `partition_by` next to it). Any other `{token}` is a typo that would otherwise
create a literal `{dtae}` directory, so it is an error — checked at load time
(`template_errors`) and again when rendering.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rivet_core.errors import ConfigError

if TYPE_CHECKING:
    from rivet_core.config.models import DestinationConfig

_TOKEN = re.compile(r"\{([^{}]*)\}")
EXPANDED_TOKENS: tuple[str, ...] = ("date", "export", "table")
VERBATIM_TOKENS: tuple[str, ...] = ("run_id", "partition")
ALLOWED_TOKENS: tuple[str, ...] = EXPANDED_TOKENS + VERBATIM_TOKENS


def unknown_tokens(text: str | None) -> list[str]:
    """Tokens in `text` that are neither expanded nor kept verbatim."""
    if not text:
        return []
    return [t for t in _TOKEN.findall(text) if t not in ALLOWED_TOKENS]


def template_errors(dest: DestinationConfig, export_name: str) -> list[str]:
    """One message per unknown token in the destination's path / prefix."""
    errors = []
    for field in ("path", "prefix"):
        for token in unknown_tokens(getattr(dest, field)):
            errors.append(
                f"export '{export_name}': destination.{field} has unknown template token "
                f"'{{{token}}}' — allowed tokens are "
                + ", ".join(f"{{{t}}}" for t in ALLOWED_TOKENS)
            )
    return errors


def _render(text: str, export_name: str, now: datetime) -> str:
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    values = {
        "date": now.astimezone(UTC).strftime("%Y-%m-%d"),
        "export": export_name,
        "table": export_name,
    }

    def replace(match: re.Match[str]) -> str:
        token = match.group(1)
        if token in values:
            return values[token]
        return match.group(0)

    return _TOKEN.sub(replace, text)


def render_destination(
    dest: DestinationConfig, export_name: str, now: datetime
) -> DestinationConfig:
    """Return a copy of `dest` with `{date}`/`{export}`/`{table}` expanded in path/prefix.

    A naive `now` is taken to be UTC. `{run_id}` is left as is.
    """
    errors = template_errors(dest, export_name)
    if errors:
        raise ConfigError(errors[0])
    update = {
        field: _render(value, export_name, now)
        for field in ("path", "prefix")
        if (value := getattr(dest, field)) is not None
    }
    return dest.model_copy(update=update)
