"""A terminated run stops: the interrupt becomes a step failure that is never retried.

Terminate (the UI, GraphQL, `instance.run_launcher.terminate`) marks the run CANCELING and
interrupts its worker: SIGINT, which Dagster raises in the step as
`DagsterExecutionInterruptedError`. Dagster 1.13 applies a step's RetryPolicy to an
interrupt too (`op_execution_error_boundary` turns it into `RetryRequested`), and every
export asset carries a RetryPolicy for transient failures (asset_options.py
`retry_policy`): with the in-process executor the terminated step was retried, exported
everything and the run ended SUCCESS — the on-call engineer could not stop an export.

`stops_on_terminate` wraps an asset body (plain or generator) and the IO manager's write:
an interrupt leaves it as a `dg.Failure(allow_retries=False)`, so the step fails once, the
steps after it are skipped and Dagster ends the run CANCELED (a run CANCELING with a failed
step). The core has already released what the attempt held: a chunk batch marks its windows
failed (retryable) and removes its staging; a plain export never reached its publish, or
its publish is the core's own (a manifest lands whole or not at all).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import dagster as dg

from rivet_dagster.dagster_compat import DagsterExecutionInterruptedError

INTERRUPTS = (DagsterExecutionInterruptedError, KeyboardInterrupt)


def terminated(export_name: str, what: str) -> dg.Failure:
    """The step failure of an interrupted attempt: not retried."""
    return dg.Failure(
        description=(f"export '{export_name}': {what} was interrupted — the run was terminated (or its worker "
                     "got SIGINT); this attempt stopped and is not retried. Materialize it again to export it"),
        metadata={"terminated": True}, allow_retries=False)


def stops_on_terminate(export_name: str, what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate an asset body or a write so an interrupt fails it without a retry
    (`functools.wraps` keeps the signature Dagster reads)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args: Any, **kwargs: Any) -> Any:
                try:
                    yield from fn(*args, **kwargs)
                except INTERRUPTS:
                    raise terminated(export_name, what) from None

            return generator

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except INTERRUPTS:
                raise terminated(export_name, what) from None

        return call

    return decorate
