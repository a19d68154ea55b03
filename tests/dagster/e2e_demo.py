"""Shared by the end-to-end tests of the Dagster tooling (test_dagster_cli.py, test_ui.py).

They drive the real `dagster` CLI and `dagster dev` in subprocesses, never mocks. Each test
module works on a throwaway copy of the demo: examples/demo/rivet.yaml (its chunk planner
stopped: `dagster.planner_status: STOPPED`) copied into a temp dir
with a small demo SQLite database beside it (RIVET_DEMO_ORDERS=500 instead of the default
1 M rows, which take ~25 s to build and ~20 s to export) and its own DAGSTER_HOME (telemetry
off, the "join the community" modal marked as seen). The repository's examples/demo and
dagster_home are never touched; subprocesses find the copy through RIVET_CONFIG.

The UI test needs Chromium: $CHROMIUM_PATH, else `chromium` on PATH, else /usr/bin/chromium.
scripts/test.sh installs Debian's `chromium` (as root) and exports CHROMIUM_PATH. A missing
browser FAILS the test with a message saying what to install; it is never skipped.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEMO_CONFIG = REPO / "examples" / "demo" / "rivet.yaml"
DEMO_ORDERS = 500
DEMO_ASSETS = ("customers", "orders", "events", "customers_chunked", "customers_chunked_manifest")


@dataclass(frozen=True)
class Demo:
    dir: Path            # rivet.yaml, shop.db and, after a run, output/, .rivet/, .rivet_state.db
    config: Path
    db: Path
    dagster_home: Path

    def env(self) -> dict[str, str]:
        """The environment of a `dagster` subprocess that serves this copy."""
        env = {**os.environ, "RIVET_CONFIG": str(self.config), "DAGSTER_HOME": str(self.dagster_home)}
        # The venv's scripts first, also when pytest runs as .venv/bin/python without an
        # activated venv.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with sqlite3.connect(self.db) as conn:
            return conn.execute(sql, params).fetchall()


def make_demo(root: Path) -> Demo:
    from rivet_core.ops.demo import ensure_demo_database

    root.mkdir(parents=True, exist_ok=True)
    config = root / "rivet.yaml"
    # The chunk planner runs by default (issue 34); here it stays stopped, so a test's
    # `dagster dev` launches only the runs the test asks for, and SIGTERM meets no tick of it
    # in flight (the daemon then logs "Could not reach user code server").
    text = DEMO_CONFIG.read_text()
    assert "\ndagster:\n  group: shop\n" in text, "the demo config's top-level dagster block moved"
    config.write_text(text.replace("\ndagster:\n  group: shop\n", "\ndagster:\n  group: shop\n  planner_status: STOPPED\n", 1))
    db = root / "shop.db"  # the config's `sqlite:///shop.db` is relative to the config's dir
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RIVET_DEMO_ORDERS", str(DEMO_ORDERS))
        ensure_demo_database(db)
    home = root / "dagster_home"
    (home / ".nux").mkdir(parents=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    return Demo(dir=root, config=config, db=db, dagster_home=home)


def chromium_path() -> str:
    """The Chromium binary to drive, or a test FAILURE saying how to get one (never a skip)."""
    configured = os.environ.get("CHROMIUM_PATH")
    if configured:
        if os.path.isfile(configured) and os.access(configured, os.X_OK):
            return configured
        pytest.fail(f"CHROMIUM_PATH={configured} is not an executable file; point it at a Chromium "
                    "binary, or unset it to use `chromium` from PATH.", pytrace=False)
    found = shutil.which("chromium") or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if found:
        return found
    pytest.fail("Chromium is required for the Dagster UI test but was not found (CHROMIUM_PATH is unset "
                "and there is no `chromium` on PATH or at /usr/bin/chromium). Run the suite with "
                "`make test` (scripts/test.sh installs Debian's chromium when run as root), or "
                "`apt-get install chromium`, or export CHROMIUM_PATH=/path/to/chromium.", pytrace=False)
