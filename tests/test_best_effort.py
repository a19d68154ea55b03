"""Broad `except Exception` swallows only through `best_effort` (issue 18 item 7).

An AST scan of every module of `rivet_core/` and `rivet_dagster/`: a handler for
`Exception` / `BaseException` (or a bare `except:`, or `contextlib.suppress(Exception)`)
must be one of

- the helper itself (`best_effort` in rivet_core/errors.py), which logs what it swallowed
  with the step's name, redacted;
- a handler that ends by raising (cleanup then re-raise, or a translation `raise X from e`);
- an **error boundary**, marked `# error boundary: <where the error goes>` on the `except`
  line, that binds the exception and uses it: the error becomes the run's failure, a
  verdict, a [FAIL] line, the CLI's exit code — it is passed on, not dropped.

Anything else is a silent swallow and fails here, naming the module, the line and the fix.
The scanner is tested on planted handlers, and the helper on what it logs.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from rivet_core.errors import best_effort

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("rivet_core", "rivet_dagster")
BROAD = {"Exception", "BaseException"}
MARK = "# error boundary:"


def _broad(node: ast.expr | None) -> bool:
    if node is None:
        return True
    if isinstance(node, ast.Name):
        return node.id in BROAD
    if isinstance(node, ast.Attribute):
        return node.attr in BROAD
    if isinstance(node, ast.Tuple):
        return any(_broad(e) for e in node.elts)
    return False


def _uses(handler: ast.ExceptHandler) -> bool:
    return handler.name is not None and any(
        isinstance(n, ast.Name) and n.id == handler.name for stmt in handler.body for n in ast.walk(stmt))


def scan(rel: str, source: str) -> list[str]:
    """Every swallowing broad handler of one module: `module:line: what — fix`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    helper_lines: set[int] = set()
    if rel == "rivet_core/errors.py":
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "best_effort":
                helper_lines = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "suppress" \
                and any(_broad(a) for a in node.args):
            problems.append(f"{rel}:{node.lineno}: suppress(Exception) swallows silently — use "
                            "`with best_effort(\"<step>\")` (rivet_core/errors.py) or suppress the "
                            "exceptions the step can raise")
        if not isinstance(node, ast.ExceptHandler) or not _broad(node.type) or node.lineno in helper_lines:
            continue
        if isinstance(node.body[-1], ast.Raise):
            continue
        if MARK in lines[node.lineno - 1]:
            if _uses(node):
                continue
            problems.append(f"{rel}:{node.lineno}: an error boundary must bind the exception and pass it on "
                            "(a verdict, a failure, a message) — one that drops it is a swallow: use best_effort")
            continue
        problems.append(f"{rel}:{node.lineno}: broad except that swallows — a best-effort step goes through "
                        "`with best_effort(\"<step>\")` (rivet_core/errors.py: logged, redacted); otherwise "
                        f"catch the exceptions the code can raise, or mark a boundary with `{MARK} …`")
    return problems


def test_no_broad_except_swallows_outside_the_helper() -> None:
    files = sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py"))
    assert len(files) > 50, f"the scan found only {len(files)} modules"
    problems = [p for f in files for p in scan(f.relative_to(ROOT).as_posix(), f.read_text())]
    assert not problems, "broad excepts outside best_effort:\n" + "\n".join(problems)


@pytest.mark.parametrize(("source", "needle"), [
    ("try:\n    f()\nexcept Exception:\n    pass\n", "swallows"),
    ("try:\n    f()\nexcept:\n    x = 1\n", "swallows"),
    ("try:\n    f()\nexcept (ValueError, BaseException) as e:\n    log(e)\n", "swallows"),
    ("try:\n    f()\nexcept Exception as e:  # error boundary: the run's failure\n    pass\n", "must bind"),
    ("import contextlib\nwith contextlib.suppress(Exception):\n    f()\n", "suppress(Exception)"),
])
def test_scanner_finds_planted_swallows(source: str, needle: str) -> None:
    problems = scan("rivet_core/planted.py", source)
    assert len(problems) == 1 and needle in problems[0], problems


@pytest.mark.parametrize("source", [
    "try:\n    f()\nexcept Exception:\n    cleanup()\n    raise\n",
    "try:\n    f()\nexcept Exception as e:\n    raise RuntimeError('x') from e\n",
    "try:\n    f()\nexcept Exception as e:  # error boundary: the run's failure\n    return_fail(e)\n",
    "try:\n    f()\nexcept (OSError, ValueError):\n    pass\n",
])
def test_scanner_accepts_what_is_not_a_swallow(source: str) -> None:
    assert scan("rivet_core/planted.py", source) == []


def test_best_effort_logs_the_swallowed_error_with_its_step_redacted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rivet.best_effort")
    with best_effort("metrics write") as attempt:
        raise OSError("could not reach postgresql://rivet:s3cr3t-pw@db:5432/state")
    assert attempt.failed and isinstance(attempt.error, OSError)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "metrics write failed: could not reach postgresql://REDACTED@db:5432/state"]
    assert "s3cr3t-pw" not in caplog.text
    assert any(r.levelno == logging.DEBUG and "Traceback" in r.getMessage() for r in caplog.records)


def test_best_effort_reports_through_the_callers_channel_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="rivet.best_effort")
    got: list[str] = []
    with best_effort("gc journal", warn=got.append, message="journal for {step} ({kind}) not stored: {reason}"):
        raise KeyError("{not a format field}")
    assert got == ["journal for gc journal (KeyError) not stored: '{not a format field}'"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # the channel logs, not twice


def test_best_effort_passes_through_success_and_base_exceptions() -> None:
    with best_effort("nothing fails") as attempt:
        value = 42
    assert value == 42 and not attempt.failed and attempt.reason == ""
    with pytest.raises(KeyboardInterrupt), best_effort("interrupted"):
        raise KeyboardInterrupt
