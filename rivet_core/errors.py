"""The error taxonomy of the engine and the exit codes it maps to.

Every failure the engine reports to a user is one of these classes. The CLI turns them
into exit codes with ONE table (docs/operations.md "Exit codes"), on every
path — `rivet run` of any mode, `validate`, `reconcile`, the command-line error boundary:

    0  success (validate: passed, legacy prefix, advisory findings only)
    1  configuration or generic error — incl. a destination that refuses the write
       (disk full, permission denied): fix the cause, then run again
    2  transient: worth retrying as is (source connection lost, S3 unreachable, export locked)
    3  data integrity: data was verified wrong or a run would make it wrong — quality gate,
       validate/reconcile found a mismatch (missing part, missing `_SUCCESS`, a manifest of
       another export, an oversized manifest), a retry that would duplicate rows, an
       incremental run whose cursor is lost while the destination holds data
    4  schema drift with `on_schema_drift: fail`

`exit_code_for(exc)` applies it to any exception (a wrapped error keeps its cause's code).
Messages name the problem *and* the fix; they must never contain credentials (callers
pass text through `rivet_core.redact.redact_secrets` before it reaches a user).

`best_effort(step)` is the one place a broad `except Exception` may swallow an error: a
step whose failure must not change a run's outcome (a metrics row, a report, a
notification, a lock heartbeat) runs inside it, and what it swallowed is logged with the
step's name, redacted (tests/test_best_effort.py holds the rule for every other module).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rivet_core.redact import redact_secrets

_log = logging.getLogger("rivet.best_effort")


class RivetError(Exception):
    """Base class. `exit_code` is what `rivet` exits with; `code` is a stable id."""

    exit_code: int = 1
    code: str | None = None

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigError(RivetError):
    """The configuration (or a command-line argument) is wrong. Exit 1."""

    exit_code = 1


class UnsupportedTypeError(ConfigError):
    """A source column has no safe Arrow mapping; raised before anything is written."""


class SourceError(RivetError):
    """A permanent source-side failure (auth, syntax, missing table, statement timeout)."""

    exit_code = 1


class TransientError(RivetError):
    """A failure that may succeed on retry (connection reset, lock timeout). Exit 2."""

    exit_code = 2


class DestinationError(RivetError):
    """Writing to or reading from the destination failed."""

    exit_code = 1


class DataIntegrityError(RivetError):
    """Quality gate failed, verification found wrong data, or a retry would duplicate. Exit 3."""

    exit_code = 3


class SchemaDriftError(RivetError):
    """Schema drift detected with `on_schema_drift: fail`. Exit 4."""

    exit_code = 4


def exit_code_for(exc: BaseException) -> int:
    """The exit code of the table above for `exc`: a RivetError's class code, promoted to 2
    when a generic (1) error is marked `transient` (a destination error worth retrying);
    anything else is 1."""
    code = exc.exit_code if isinstance(exc, RivetError) else 1
    if code == 1 and getattr(exc, "transient", False):
        return TransientError.exit_code
    return code


class InvariantViolation(AssertionError):
    """A run-integrity invariant was broken: a runner bypassed a commit facade.

    Raised only when `RIVET_STRICT_INVARIANTS=1` (tests); production logs a WARN line.
    """


@dataclass
class Attempt:
    """What a `best_effort` block did: `error` is the exception it swallowed, or None."""

    step: str
    error: Exception | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def reason(self) -> str:
        """The swallowed error's message, redacted ('' when nothing failed)."""
        return redact_secrets(self.error) if self.error is not None else ""


@contextmanager
def best_effort(step: str, *, warn: Callable[[str], object] | None = None,
                message: str = "{step} failed: {reason}", logger: logging.Logger | None = None,
                level: int = logging.WARNING) -> Iterator[Attempt]:
    """Run a best-effort step: an `Exception` raised inside is swallowed and reported.

        with best_effort("metrics write", warn=summary.add_warning) as attempt:
            state.record_metric(row)
        if attempt.failed: ...   # optional: act on `attempt.error` / `attempt.reason`

    The report is `message` with `{step}`, `{reason}` (the error's text, redacted —
    rivet_core/redact.py) and `{kind}` (its class name) replaced. It goes to `warn` when given — a
    channel that logs at WARNING itself and keeps the text for the run's summary
    (`RunSummary.add_warning`) — else to `logger` (default `rivet.best_effort`) at `level`.
    `level` is lowered only where the failure is already the step's reported result (a
    `rivet doctor` [FAIL] line), so it is not printed twice. The traceback is logged at
    DEBUG, redacted too. `BaseException` (KeyboardInterrupt, SystemExit, a test's fault-point kill) is
    never swallowed.
    """
    attempt = Attempt(step)
    try:
        yield attempt
    except Exception as exc:  # the one broad handler that may swallow (tests/test_best_effort.py)
        attempt.error = exc
        # Plain replacement, not str.format: a URI or name in `message` may hold braces.
        text = (message.replace("{step}", step).replace("{kind}", type(exc).__name__)
                .replace("{reason}", attempt.reason))
        log = logger or _log
        if warn is not None:
            warn(text)
        else:
            log.log(level, "%s", text)
        if log.isEnabledFor(logging.DEBUG):  # the traceback, redacted like the message
            log.debug("best-effort step %r swallowed:\n%s", step,
                      redact_secrets("".join(traceback.format_exception(exc))).rstrip())
