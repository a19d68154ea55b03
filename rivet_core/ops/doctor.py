"""`rivet doctor`: prove, before a run, that every piece a run touches is usable.

Why: the first real run of a new config should not be where a user learns that the password
in the env var is stale, the bucket policy lacks DeleteObject or the state directory is
read-only — least of all at 2 a.m. Each check does the smallest real operation that would
fail the same way a run fails, and turns the failure into one line naming the problem and
the fix:

- config: the file loads (substitution, strict schema);
- source: connect, authenticate, `SELECT 1` (the one source of the config), then which
  read path a run takes there (the fast path, or the fallback naming the driver version
  and what is missing: rivet_core/source/fast_path.py);
- destination (each distinct prefix): write, read back and delete a `.rivet_doctor_probe`
  object under the export's prefix (the only object rivet ever deletes; verification
  ignores it should a crash leave it behind); and that the prefix is not inside the `data/`
  folder of a prefix another export published (`check_not_nested`: typically another
  config's export, which the config load cannot see — its gc would refuse to clean);
- integrations (each block the config uses, `ConfigBlock.doctor_checks`): their own
  runtime settings, e.g. the orchestrator instance's;
- state store: open + migrate, then the same writability probe a run makes before it reads
  the source (state/writable.py: a no-op `UPDATE … WHERE false` on the cursor table in a
  write transaction) — proves write access (SQLite takes its write lock, PostgreSQL checks
  the role's privileges) without changing state. Doctor writes no state row of its own:
  the state tables have their writers (docs/adr/0001-write-ordering-facades.md).

Pure engine code: no click, no printing. Every text a check produces passes through
`redact_secrets` (passwords registered by `SourceConfig.resolve_url` are masked too).

Exit code (docs/rivet-compat.md "CLI output and exit codes"): 0 when every check passed; 2 when every failure is transient
(connection refused, timeout, server starting — a retry later may pass); else 1.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rivet_core.config.source_url import SQLALCHEMY_PREFIX
from rivet_core.destination import DOCTOR_PROBE_KEY
from rivet_core.errors import best_effort
from rivet_core.ops.doctor_lines import Check
from rivet_core.redact import redact_secrets

log = logging.getLogger("rivet.doctor")

ENGINE_LABELS = {"postgres": "PostgreSQL", "mysql": "MySQL/MariaDB", "sqlite": "SQLite"}
DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306}
PROBE_KEY = DOCTOR_PROBE_KEY  # verification ignores it (manifest/artifacts.py)



@dataclass
class DoctorReport:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        failed = [c for c in self.checks if not c.ok]
        if not failed:
            return 0
        return 2 if all(c.transient for c in failed) else 1

    def lines(self) -> list[str]:
        failed = sum(not c.ok for c in self.checks)
        tail = ("All checks passed." if not failed else
                f"Some checks failed: {failed} of {len(self.checks)} — fix the [FAIL] lines above and re-run "
                "`rivet doctor`.")
        return [c.line() for c in self.checks] + [tail]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "exit_code": self.exit_code, "checks": [asdict(c) for c in self.checks]}


def _split(message: str) -> tuple[str, str | None]:
    """The engine's errors read "problem — fix"; a doctor line shows the two apart. A
    multi-line message (several config problems, each with its own fix) stays whole."""
    if "\n" in message.strip():
        return message.strip(), None
    problem, sep, fix = message.partition(" — ")
    return (problem.strip(), fix.strip() or None) if sep else (message.strip(), None)


def _chain(exc: BaseException) -> list[BaseException]:
    """`exc` and its causes/contexts (the driver error sits under the engine's wrapper)."""
    seen: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and node not in seen and len(seen) < 10:
        seen.append(node)
        node = node.__cause__ or node.__context__
    return seen


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__


# ------------------------------------------------------------------------------ runner
def run_doctor(config_path: str | Path, params: Mapping[str, str] | None = None) -> DoctorReport:
    """Run every check of the config at `config_path` (never raises for a failed check)."""
    from rivet_core.config import load_config

    path = Path(config_path)
    try:
        config = load_config(path, dict(params or {}))
    except Exception as exc:  # error boundary: every failure becomes a [FAIL] line
        problem, fix = _split(_message(exc))
        return DoctorReport([Check("config", False, f"{path}: {problem}",
                                   fix or f"correct {path} as the message says (each problem names its "
                                   "own fix), then re-run `rivet doctor`")])
    checks = [Check("config", True, f"{config.config_path} parsed ({len(config.exports)} export(s))")]
    checks.extend(check_source(config))
    checks.extend(check_destinations(config))
    checks.append(check_state(config))
    checks.append(check_staging(config))
    checks.extend(check_integrations(config))
    from rivet_core.ops.cdc_doctor import check_cdc

    checks.extend(check_cdc(config))  # mode: cdc: wal_level, each slot's retained WAL and lag
    return DoctorReport(checks)


def check_integrations(config: Any) -> list[Check]:
    """The checks each integration block the config uses brings (`ConfigBlock.doctor_checks`,
    e.g. that the orchestrator's instance has the settings rivet's recoveries need): the core
    runs them without knowing the integrations by name."""
    from rivet_core.config.blocks import known_blocks

    checks: list[Check] = []
    for name, block in sorted(known_blocks().items()):
        used = getattr(config, name, None) is not None or any(
            getattr(e, name, None) is not None for e in config.exports)
        if block.doctor_checks is None or not used:
            continue
        try:
            found = block.doctor_checks(config)
        except Exception as exc:  # error boundary: a broken integration check is one [FAIL] line
            found = [(name, False, f"the {name} integration's check failed: {_message(exc)}", None)]
        checks.extend(Check(check, ok, detail, fix) for check, ok, detail, fix in found)
    return checks


# ------------------------------------------------------------------------------ source
def _credential_fix(source: Any) -> str:
    """Where the password comes from, so the fix names the exact place to correct."""
    if source.url_env:
        return (f"check the user and password in the URL held by the environment variable "
                f"{source.url_env} (percent-encode special characters in the password)")
    if source.password_env:
        return f"check the password in the environment variable {source.password_env} (source.password_env)"
    if source.url_file:
        return f"check the user and password in the URL in the file {source.url_file} (source.url_file)"
    return ("check source.user/source.password or the URL in source.url — and move the secret to an "
            "environment variable named by source.url_env")


def _url_where(url: str, engine: str) -> tuple[str, str, str]:
    """(host:port, user, database) of a server URL — never the password. An unparsable
    URL (normally refused earlier, by `resolve_url`) gives placeholders, not an error."""
    try:
        parts = urllib.parse.urlsplit(url.removeprefix(SQLALCHEMY_PREFIX))
    except ValueError:
        return "(unparsable host)", getpass.getuser(), ""
    host = parts.hostname or "localhost"
    try:
        port = parts.port or DEFAULT_PORTS.get(engine)
    except ValueError:
        port = None
    user = urllib.parse.unquote(parts.username or "") or getpass.getuser()
    database = urllib.parse.unquote(parts.path.lstrip("/"))
    return (f"{host}:{port}" if port else host), user, database


def check_source(config: Any) -> list[Check]:
    """Connect, authenticate and run `SELECT 1` against the config's source; then say which
    read path a run takes on this install (`read_path_check`)."""
    from rivet_core.config.tuning import resolve_tuning
    from rivet_core.source import engine_of, open_source
    from rivet_core.source.dialect import dialect_of

    source = config.source
    shown = ENGINE_LABELS.get(source.type, source.type)
    label = f"source ({shown})"
    try:
        url = source.resolve_url(config.config_dir)
    except Exception as exc:  # error boundary: a [FAIL] line (env var unset, url_file missing …)
        problem, fix = _split(_message(exc))
        return [Check(label, False, problem, fix or "set the environment variable / file source.url_env, "
                      "source.url_file or source.password_env names")]
    engine = engine_of(url)  # a `type: sqlalchemy` source: `sqlalchemy:<dialect>`
    try:
        tuning = resolve_tuning(source.tuning.as_dict() if source.tuning else None, None, source.environment)
        with open_source(url, tuning, engine=engine) as session:
            session.scalar("SELECT 1")
            path = read_path_check(shown, session)
    except Exception as exc:  # error boundary: a [FAIL] line
        return [_source_failure(label, source, url, exc)]
    if dialect_of(engine).file_based:
        return [Check(label, True, f"opened {url.split(':///', 1)[-1]} and ran SELECT 1")]
    where, user, database = _url_where(url, engine)
    return [Check(label, True, f"connected to {where}" + (f"/{database}" if database else "")
                  + f" as user '{user}', authenticated, SELECT 1 ok")] + ([path] if path else [])


def read_path_check(engine: str, session: Any) -> Check | None:
    """The read path a run takes on this install (`SourceSession.planned_read_path`,
    rivet_core/source/fast_path.py): the fast path, or the fallback with the driver version,
    what is missing and what it costs. [OK] either way — a fallback is slower, never wrong —
    but said before the run, not found after. None for an engine without a fast path."""
    planned = session.planned_read_path()
    return None if planned is None else Check(f"read path ({engine})", True, planned)


def _source_failure(label: str, source: Any, url: str, exc: BaseException) -> Check:
    from rivet_core.source import engine_of
    from rivet_core.source.dialect import dialect_of
    from rivet_core.source.retry import classify_error

    transient = classify_error(exc).transient
    engine = engine_of(url)
    if dialect_of(engine).file_based:
        problem, fix = _split(_message(exc))
        return Check(label, False, problem, fix or "check the SQLite path in the source URL and its permissions",
                     transient=transient)
    where, user, database = _url_where(url, engine)
    kind = _source_error_kind(exc)
    url_hint = (f"the host/port in the URL held by {source.url_env}" if source.url_env
                else "source.host/source.port or the host/port in the source URL")
    if kind == "auth":
        return Check(label, False, f"authentication failed for user '{user}' at {where}",
                     _credential_fix(source), transient=False)
    if kind == "dns":
        return Check(label, False, f"cannot connect to {where} (host name not found)",
                     "check the host name in " + (f"the URL held by {source.url_env}" if source.url_env
                                                  else "source.host or the source URL")
                     + ": this machine's DNS cannot resolve it",
                     transient=True)
    if kind in ("refused", "timeout"):
        reason = "connection refused" if kind == "refused" else "timed out"
        return Check(label, False, f"cannot connect to {where} ({reason})",
                     f"check that the {ENGINE_LABELS.get(engine, engine)} server is running and listening on {where}, "
                     f"and {url_hint}; a firewall, VPN or security group must let this machine in",
                     transient=True)
    if kind == "database":
        return Check(label, False, f"database '{database}' does not exist on {where}",
                     "fix the database name in the source URL (or source.database), or create the database",
                     transient=False)
    problem, fix = _split(_message(exc))
    return Check(label, False, problem, fix, transient=transient)


def _source_error_kind(exc: BaseException) -> str:
    """auth | refused | timeout | dns | database | other, from driver codes then text."""
    for node in _chain(exc):
        sqlstate = getattr(node, "sqlstate", None)
        if sqlstate in ("28P01", "28000"):
            return "auth"
        if sqlstate == "3D000":
            return "database"
        args = getattr(node, "args", ())
        code = args[0] if args and isinstance(args[0], int) else None
        if code in (1045, 1698, 1044):
            return "auth"
        if code == 1049:
            return "database"
    text = " ".join(str(n) for n in _chain(exc)).lower()
    if "password authentication failed" in text or "access denied for user" in text:
        return "auth"
    if "connection refused" in text:
        return "refused"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if "name or service not known" in text or "could not translate host name" in text \
            or "nodename nor servname" in text or "temporary failure in name resolution" in text:
        return "dns"
    if ("does not exist" in text and "database" in text) or "unknown database" in text:
        return "database"
    if "can't connect" in text or "could not connect" in text:
        return "refused"
    return "other"


# ------------------------------------------------------------------------- destination
def check_destinations(config: Any) -> list[Check]:
    """One write/read/delete probe per distinct destination prefix (stdout: nothing to probe)."""
    from rivet_core.unit.resolve import destination_spec

    now = datetime.now(UTC)
    checks: list[Check] = []
    seen: set[tuple[Any, ...]] = set()
    for export in config.exports:
        label = f"destination {export.name}"
        try:
            spec = destination_spec(config, export, now)
        except Exception as exc:  # error boundary: a [FAIL] line (e.g. access_key_env not set)
            problem, fix = _split(_message(exc))
            checks.append(Check(label, False, problem, fix))
            continue
        identity = (spec.kind, spec.path, spec.bucket, spec.prefix, spec.endpoint)
        if identity in seen:
            continue
        seen.add(identity)
        if spec.kind == "stdout":
            checks.append(Check(label, True, "stdout (nothing to probe)"))
            continue
        checks.append(probe_destination(label, spec, config.config_dir))
        nested = check_not_nested(label, spec, config.config_dir)
        if nested is not None:
            checks.append(nested)
    return checks


def _enclosing_prefixes(spec: Any, base_dir: Path) -> list[tuple[Any, str]]:
    """(spec of an ancestor prefix, where it is shown) for each ancestor whose `data/` folder
    holds this destination: `out/` for `out/data/eb`. Another export published at such an
    ancestor would count this one's files as its own orphans (manifest/retention.py)."""
    if spec.kind == "local":
        path = (base_dir / (spec.path or ".")).resolve()
        return [(dataclasses.replace(spec, path=str(parent)), str(parent))
                for parent, child in zip(path.parents, [path, *path.parents], strict=False)
                if child.name == "data"]
    segments = [s for s in (spec.prefix or "").split("/") if s]
    return [(dataclasses.replace(spec, prefix="/".join(segments[:i]) + "/" if i else ""),
             f"{spec.bucket}/{'/'.join(segments[:i])}")
            for i, segment in enumerate(segments) if segment == "data"]


def check_not_nested(label: str, spec: Any, base_dir: Path) -> Check | None:
    """A [FAIL] line when this destination sits inside the `data/` folder of a prefix another
    export published (its `manifest.json`) — typically another config's export; that
    export's retention and `rivet gc` then refuse to clean (they would take these files for
    orphans). None when it does not (or an ancestor cannot be read: the probe reports access)."""
    from rivet_core.destination import open_destination

    for ancestor, where in _enclosing_prefixes(spec, base_dir):
        with best_effort("look for an enclosing export", logger=log) as attempt:
            found = open_destination(ancestor, base_dir, create=False).head("manifest.json") is not None
        if attempt.failed or not found:
            continue
        return Check(f"{label} nesting", False,
                     f"this destination is inside the data/ folder of the export published at {where} (its "
                     "manifest.json): that export's retention and `rivet gc` refuse to clean its prefix while "
                     "these files are there, and readers of its data/ read them as its rows",
                     f"give this export (or the one at {where}) a destination outside the other's prefix")
    return None


def probe_destination(label: str, spec: Any, base_dir: Path) -> Check:
    """Write, read back and delete the probe object; the first step that fails is reported."""
    from rivet_core.destination import open_destination

    where = _spec_where(spec, base_dir)
    token = f"rivet doctor probe {uuid.uuid4()}\n".encode()
    steps: list[tuple[str, Callable[[Any], Any]]] = [
        ("write", lambda d: d.write_bytes(token, PROBE_KEY)),
        ("read back", lambda d: _expect(d.read_bytes(PROBE_KEY, max_bytes=4096) == token,
                                        "the object read back differs from what was written")),
        ("delete", lambda d: d.delete(PROBE_KEY)),
        ("confirm deletion of", lambda d: _expect(d.head(PROBE_KEY) is None,
                                                  "the probe object is still listed after delete")),
    ]
    try:
        dest = open_destination(spec, base_dir)
    except Exception as exc:  # error boundary: a [FAIL] line
        return _destination_failure(label, spec, where, "create", exc)
    for action, step in steps:
        try:
            step(dest)
        except Exception as exc:  # error boundary: a [FAIL] line
            if action != "write":
                # Never leave the probe behind if we can help it; the reported failure is the first one.
                with best_effort("delete the doctor probe", logger=log):
                    dest.delete(PROBE_KEY)
            return _destination_failure(label, spec, where, action, exc)
    return Check(label, True, f"{where}: wrote, read back and deleted {PROBE_KEY}")


class _ProbeMismatch(Exception):
    pass


def _expect(condition: bool, message: str) -> None:
    if not condition:
        raise _ProbeMismatch(message)


def _spec_where(spec: Any, base_dir: Path) -> str:
    if spec.kind == "local":
        root = Path(spec.path or spec.prefix or ".").expanduser()
        return str(root if root.is_absolute() else (base_dir / root))
    scheme = {"gcs": "gs", "azure": "az"}.get(spec.kind, "s3")
    return f"{scheme}://{spec.bucket}/{spec.prefix or ''}"


def _destination_failure(label: str, spec: Any, where: str, action: str, exc: BaseException) -> Check:
    transient = bool(getattr(exc, "transient", False))
    if spec.kind == "local":
        os_error = next((n for n in _chain(exc) if isinstance(n, OSError)), None)
        reason = (os_error.strerror if os_error is not None and os_error.strerror else _split(_message(exc))[0])
        if action in ("create", "write"):
            blocker = next((p for p in [Path(where), *Path(where).parents] if p.exists()), None)
            if blocker is not None and not blocker.is_dir():  # chmod would not help
                return Check(label, False, f"{blocker} is a file, not a directory, so the local "
                             f"destination {where} cannot be created there",
                             f"move or rename {blocker}, or point destination.path at a directory",
                             transient=False)
            return Check(label, False, f"local directory {where} is not writable ({reason})",
                         f"make {where} writable by user '{getpass.getuser()}' (chown/chmod, or remount "
                         "the filesystem read-write), or point destination.path at a writable directory",
                         transient=False)
        return Check(label, False, f"{action} of the probe object in {where} failed ({reason})",
                     f"check the permissions and the filesystem of {where}", transient=transient)
    problem, fix = _split(_message(exc))
    if action not in ("create", "write") and not problem.lower().startswith(action):
        problem = f"{action} of the probe object failed: {problem}"
    if action == "delete" and not fix:
        fix = {"gcs": "grant storage.objects.delete on the bucket",
               "azure": "grant delete on the container (Storage Blob Data Contributor)"}.get(
            spec.kind, "grant s3:DeleteObject on the prefix") + " (rivet deletes only this probe object)"
    return Check(label, False, f"{where}: {problem}", fix, transient=transient)


# ------------------------------------------------------------------------------- state
def check_state(config: Any) -> Check:
    """Open (and migrate) the state store, then probe that a run could write it (writable.py)."""
    from rivet_core.errors import RivetError
    from rivet_core.state import StateStore, state_url_for
    from rivet_core.state.writable import assert_writable

    label = "state store"
    try:
        target = redact_secrets(state_url_for(config.config_path))
    except Exception as exc:  # error boundary: a [FAIL] line
        problem, fix = _split(_message(exc))
        return Check(label, False, problem, fix)
    sqlite_path = target.split(":///", 1)[1] if target.startswith("sqlite") else None
    fix = (f"make sure {sqlite_path} can be created and written (its directory writable, the path a "
           f"SQLite file, not a directory), or set RIVET_STATE_URL=postgresql://… to use PostgreSQL"
           if sqlite_path else
           "check RIVET_STATE_URL (host, port, user, password, database) and that the PostgreSQL "
           "server is reachable from this machine")
    try:
        store = StateStore.open(config.config_path)
    except Exception as exc:  # error boundary: a [FAIL] line
        problem, _hint = _split(_message(exc))
        return Check(label, False, problem, fix, transient=getattr(exc, "exit_code", 1) == 2)
    try:
        assert_writable(store.database, store.url)
    except RivetError as exc:  # the run's own verdict: read-only / no privilege / locked
        problem, hint = _split(_message(exc))
        hint = (hint or "").removesuffix(" (nothing was exported)") or fix
        return Check(label, False, problem, hint, transient=exc.exit_code == 2)
    except Exception as exc:  # error boundary: a [FAIL] line
        return Check(label, False, f"{store.url} is not writable ({_message(exc)})", fix)
    finally:
        store.close()
    return Check(label, True, f"{store.url}: opened, schema current, writable (probe changed nothing)")


# ----------------------------------------------------------------------------- staging
def check_staging(config: Any) -> Check:
    """Report staging left under `.rivet/staging/` (pipeline/staging/directories.py): count, bytes, path.
    Leftovers never stop a run (the next run of each export removes its dead runs'
    staging), so this line is [OK] and informative; nothing is created or removed here."""
    from rivet_core.pipeline.single.job import staging_root
    from rivet_core.pipeline.staging.directories import scan_staging

    label = "staging"
    root = staging_root(config)
    live: set[str] = set()
    # Already reported by the state store check (INFO, not twice); owner files still tell.
    with best_effort("read the export locks", logger=log, level=logging.INFO):
        from rivet_core.state import StateStore

        store = StateStore.open(config.config_path)
        try:
            live = {h.run_id for h in store.list_export_locks() if h.run_id and h.stale_reason() is None}
        finally:
            store.close()
    try:
        found = scan_staging(root, [e.name for e in config.exports], live)
    except OSError as exc:
        return Check(label, False, f"cannot read {root} ({exc.strerror or exc})",
                     f"make {root} readable by this user")
    dead = [d for d in found if not d.live]
    in_use = len(found) - len(dead)
    busy = f"; {in_use} in use by running export(s)" if in_use else ""
    if not dead:
        return Check(label, True, f"{root}: no leftovers from dead runs{busy}")
    owners = sorted({d.export_name or "?" for d in dead})
    return Check(label, True, (
        f"{root}: {len(dead)} leftover director{'y' if len(dead) == 1 else 'ies'} from dead runs, "
        f"{sum(d.bytes for d in dead)} bytes in {sum(d.files for d in dead)} file(s) (export(s): "
        f"{', '.join(owners)}){busy} — the next run of each export removes them; or delete "
        + ", ".join(str(d.path) for d in dead[:5]) + (" …" if len(dead) > 5 else "")))


__all__ = ["Check", "DoctorReport", "PROBE_KEY", "check_destinations", "check_source", "check_staging",
           "check_state", "probe_destination", "run_doctor"]
