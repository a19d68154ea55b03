"""Construction of `DestinationError` instances with the `transient` flag set.

`rivet_core.errors.DestinationError` is owned elsewhere and has no `transient` attribute
of its own; retry logic asks `getattr(err, "transient", False)`. Every error raised by the
destination layer is built here so the flag is always present and the message always goes
through `redact_secrets` (docs/rivet-compat.md "Security": no credential ever reaches a user).
"""

from __future__ import annotations

from rivet_core.errors import DestinationError
from rivet_core.redact import redact_secrets


def destination_error(message: str, *, transient: bool = False, code: str | None = None) -> DestinationError:
    """Return a redacted `DestinationError` carrying `transient` (True = worth retrying)."""
    err = DestinationError(redact_secrets(message), code=code)
    err.transient = transient  # type: ignore[attr-defined]
    return err
