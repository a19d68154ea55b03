"""One `rivet doctor` line (`Check`): what was verified or what is wrong, and the fix.

Its own module so the per-topic doctor checks (`doctor.py`, `cdc_doctor.py`) share the line
without importing one another.
"""

from __future__ import annotations

from dataclasses import dataclass

from rivet_core.redact import redact_secrets


@dataclass
class Check:
    """One doctor line. `detail` says what was verified (OK) or what is wrong (FAIL)."""

    name: str
    ok: bool
    detail: str
    fix: str | None = None
    #: A failure a retry may clear (network, server starting) — decides exit 2 vs 1.
    transient: bool = False

    def __post_init__(self) -> None:
        self.detail = _clean(self.detail)
        self.fix = _clean(self.fix) if self.fix else None
        if not self.ok and not self.fix:
            self.fix = "see the message; `rivet -vv doctor` logs the full driver error"

    def line(self) -> str:
        if self.ok:
            return f"[OK] {self.name}: {self.detail}"
        return f"[FAIL] {self.name}: {self.detail} — fix: {self.fix}"


def _clean(text: str) -> str:
    """Redacted, single line, no terminal control characters."""
    text = "; ".join(ln.strip() for ln in redact_secrets(text).splitlines() if ln.strip()).replace(":; ", ": ")
    return "".join(ch for ch in text if ch.isprintable())
