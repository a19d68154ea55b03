"""rivet in a user's `dg` project (issue 14 items 1, 2, 10): the real `dg` CLI on a copy of
`examples/dg_project` — laid out as `create-dagster project` does — and on a project that
installs the built wheel into a fresh virtualenv.

Checked: `dg list components` lists the component; `dg check defs` loads two component
instances beside the project's own asset; `dg list defs --json` shows the lineage
(source table → export → the user's asset); `dg launch` materializes exports and the user's
asset, and the destination re-read with pyarrow equals the SQLite source; `dg scaffold defs`
writes a defs.yaml and a starter rivet.yaml that loads; a wrong attribute or a broken
rivet.yaml fails `dg check defs` naming the field and the file, once, and writes nothing.
Issue 34's newcomer dead ends: `dg scaffold defs --json-params` with its variable unset,
the chunk planner under `dg dev`, the BetaWarning on launch, clashes with the user's own
definitions.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rivet_core.ops.demo import ensure_demo_database
from tests.helpers import REPO

EXAMPLE = REPO / "examples" / "dg_project"
VENV_BIN = Path(sys.executable).parent
SHOP = Path("src/shop_pipeline/defs/shop")


def dg(project: Path, *args: str, env: dict[str, str] | None = None, bin_dir: Path = VENV_BIN,
       check: bool = True) -> subprocess.CompletedProcess[str]:
    """`dg <args>` in `project`, with the project's src/ importable (as an editable install of
    the project would make it) and a throwaway DAGSTER_HOME."""
    # The project's src/ first, then the caller's PYTHONPATH (a worktree's checkout over the
    # shared editable install).
    path = os.pathsep.join(p for p in (str(project / "src"), os.environ.get("PYTHONPATH", "")) if p)
    full_env = {**os.environ, "PYTHONPATH": path, "NO_COLOR": "1",
                "DAGSTER_HOME": str(project / ".dagster_home"), **(env or {})}
    (project / ".dagster_home").mkdir(exist_ok=True)
    proc = subprocess.run([str(bin_dir / "dg"), *args], cwd=project, env=full_env, capture_output=True,
                          text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"dg {' '.join(args)} exited {proc.returncode}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/dg_project with a small demo database."""
    root = tmp_path / "dg_project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(
        "data", ".dagster_home", "__pycache__", ".rivet", ".rivet_state.db*"))
    monkeypatch.setenv("RIVET_DEMO_ORDERS", "3000")
    ensure_demo_database(root / SHOP / "data" / "shop.db")
    return root


def listed_defs(project: Path) -> dict:
    return json.loads(dg(project, "list", "defs", "--json").stdout)


def test_dg_lists_the_component_and_loads_two_instances_beside_the_users_own_asset(project: Path) -> None:
    components = json.loads(dg(project, "list", "components", "--json").stdout)
    assert "rivet_dagster.RivetExportsComponent" in {i["key"] for i in components["items"]}

    # A second instance: another folder, another rivet.yaml (the same database, other exports).
    second = project / "src/shop_pipeline/defs/events"
    second.mkdir()
    (second / "defs.yaml").write_text(
        "type: rivet_dagster.RivetExportsComponent\nattributes:\n  config: rivet.yaml\n  key_prefix: events_area\n")
    (second / "rivet.yaml").write_text(
        f"source: {{type: sqlite, url: 'sqlite:///{project / SHOP / 'data' / 'shop.db'}'}}\n"
        "exports:\n  - name: customers_copy\n    table: customers\n    mode: full\n    format: csv\n"
        f"    destination: {{type: local, path: '{project / 'out2' / 'customers_copy'}'}}\n")
    checked = dg(project, "check", "defs")
    assert "All definitions loaded successfully" in checked.stdout + checked.stderr

    assets = {a["asset_key"]: a for a in listed_defs(project)["assets"]}
    assert {"shop/customers", "shop/orders", "events_area/customers_copy", "sqlite/shop/customers",
            "sqlite/shop/orders", "revenue_by_customer"} <= set(assets)
    # lineage: database table -> rivet export -> the user's asset; both instances share the table
    assert assets["shop/orders"]["dependency_keys"] == ["sqlite/shop/orders"]
    assert assets["events_area/customers_copy"]["dependency_keys"] == ["sqlite/shop/customers"]
    assert assets["revenue_by_customer"]["dependency_keys"] == ["shop/orders"]
    assert assets["shop/orders"]["owners"] == [{"team": "data-platform"}]  # dg renders team owners so


def test_dg_launch_materializes_the_exports_and_the_users_asset_without_a_beta_warning_and_the_files_equal_the_source(
        project: Path) -> None:
    launched = dg(project, "launch", "--assets", 'key:"shop/customers" or key:"shop/orders" or key:revenue_by_customer')
    # dg remade the component's checks as plain assets definitions, which Dagster turned back
    # with a BetaWarning about `execution_type` on every launch (issue 34)
    said = launched.stdout + launched.stderr
    assert "BetaWarning" not in said and "execution_type" not in said, said[-3000:]
    out = project / SHOP / "data" / "output"
    with sqlite3.connect(project / SHOP / "data" / "shop.db") as conn:
        source_ids = sorted(r[0] for r in conn.execute("SELECT id FROM orders"))
        customer_ids = sorted(r[0] for r in conn.execute("SELECT id FROM customers"))
    for name, expected in (("orders", source_ids), ("customers", customer_ids)):
        manifest = json.loads((out / name / "manifest.json").read_text())
        assert manifest["status"] == "success" and (out / name / "_SUCCESS").is_file()
        ids = sorted(i for p in manifest["parts"] for i in pq.read_table(out / name / p["path"])["id"].to_pylist())
        assert ids == expected, name


def test_the_example_project_builds_its_definitions_once_per_process(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Dagster calls a `@dg.definitions` function each time it reconstructs the repository
    (six times in one `dg launch`); the example builds them once per process
    (docs/dagster-guide.md, "What a run costs")."""
    import importlib

    def unload() -> None:
        for name in [m for m in sys.modules if m == "shop_pipeline" or m.startswith("shop_pipeline.")]:
            del sys.modules[name]

    monkeypatch.syspath_prepend(str(project / "src"))
    unload()
    try:
        defs = importlib.import_module("shop_pipeline.definitions").defs
        first = defs()
        assert defs() is first
        assert {"shop/customers", "shop/orders", "revenue_by_customer"} <= {
            k.to_user_string() for k in first.resolve_all_asset_keys()}
    finally:
        unload()  # the copy's modules leave with the test


def test_dg_scaffold_defs_writes_a_component_and_a_starter_config_that_loads(project: Path) -> None:
    dg(project, "scaffold", "defs", "rivet_dagster.RivetExportsComponent", "sales")
    folder = project / "src/shop_pipeline/defs/sales"
    assert "type: rivet_dagster.RivetExportsComponent" in (folder / "defs.yaml").read_text()
    assert "config: rivet.yaml" in (folder / "defs.yaml").read_text()
    starter = (folder / "rivet.yaml").read_text()
    assert "url_env: DATABASE_URL" in starter and "exports:" in starter
    # The starter loads without a database (loading never connects) next to the shop component.
    dg(project, "check", "defs")
    assets = {a["asset_key"] for a in listed_defs(project)["assets"]}
    assert {"orders", "postgres/postgres/public/orders"} <= assets


def test_dg_scaffold_defs_with_its_source_variable_unset_fails_in_one_line_and_the_retry_works(
        project: Path) -> None:
    """`--json-params '{"source_env": …}'` with the variable unset: one message naming the
    variable and the fix, no traceback, no `defs/sales/` left to block the retry (issue 34)."""
    env = {k: v for k, v in os.environ.items() if k != "SALES_DB_URL"}
    params = ("scaffold", "defs", "rivet_dagster.RivetExportsComponent", "sales",
              "--json-params", '{"source_env": "SALES_DB_URL"}')
    path = os.pathsep.join(p for p in (str(project / "src"), os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run([str(VENV_BIN / "dg"), *params], cwd=project, capture_output=True, text=True,
                          timeout=600, env={**env, "PYTHONPATH": path, "NO_COLOR": "1",
                                            "DAGSTER_HOME": str(project / ".dagster_home")})
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said, said
    assert "'SALES_DB_URL' is not set" in said and "export SALES_DB_URL=" in said, said
    assert not (project / "src/shop_pipeline/defs/sales").exists()

    dg(project, *params, env={"SALES_DB_URL": f"sqlite:///{project / SHOP / 'data' / 'shop.db'}"})
    assert "url_env: SALES_DB_URL" in (project / "src/shop_pipeline/defs/sales/rivet.yaml").read_text()


def test_a_scaffolded_postgres_component_keeps_its_source_keys_when_the_variable_is_unset_at_load(
        project: Path, pg_url: str) -> None:
    """The newcomer's dead end (issue 34): with `url_env` unset while the code location loads,
    the source keys silently became `postgres/postgres/...`. The scaffold now writes the
    database's name into rivet.yaml (`source.database`), so `dg list defs` shows the same keys
    with the variable set or unset, and no warning per key."""
    from tests.dagster.support import create_orders

    create_orders(pg_url, rows=10)
    database = pg_url.rsplit("/", 1)[-1]
    dg(project, "scaffold", "defs", "rivet_dagster.RivetExportsComponent", "warehouse",
       "--json-params", '{"source_env": "WAREHOUSE_DB_URL"}', env={"WAREHOUSE_DB_URL": pg_url})
    assert f"database: {database}" in (project / "src/shop_pipeline/defs/warehouse/rivet.yaml").read_text()

    def source_keys(url: str) -> tuple[set[str], str]:
        """(the postgres source keys `dg list defs` shows, its stderr) with the variable = url."""
        proc = dg(project, "list", "defs", "--json", env={"WAREHOUSE_DB_URL": url})
        return {a["asset_key"] for a in json.loads(proc.stdout)["assets"]
                if a["asset_key"].startswith("postgres/")}, proc.stderr

    assert source_keys(pg_url)[0] == {f"postgres/{database}/public/orders"}
    keys, said = source_keys("")  # unset while the code location loads
    assert keys == {f"postgres/{database}/public/orders"} and "WAREHOUSE_DB_URL" not in said, said[-3000:]


DG_DEV_TIMEOUT = 300  # dg dev up, the planner's first tick, the window runs and the manifest (~60 s here)


def _dg_dev_until(project: Path, done: Callable[[], bool]) -> str:
    """`dg dev` in `project` (its own session) until `done()` holds — polled, at most
    DG_DEV_TIMEOUT s, else the test fails with the log — then SIGTERM to its process group."""
    import signal
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.pathsep.join(p for p in (str(project / "src"), os.environ.get("PYTHONPATH", "")) if p)
    (project / ".dagster_home").mkdir(exist_ok=True)
    log = project / "dg_dev.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(VENV_BIN / "dg"), "dev", "--host", "127.0.0.1", "--port", str(port)],
                                cwd=project, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": path, "NO_COLOR": "1", "TMPDIR": str(project),
                                     "DAGSTER_HOME": str(project / ".dagster_home")},
                                start_new_session=True)
    try:
        deadline = time.monotonic() + DG_DEV_TIMEOUT
        while not done():
            assert proc.poll() is None, f"dg dev exited {proc.returncode}:\n{log.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"not done after {DG_DEV_TIMEOUT} s:\n{log.read_text()[-4000:]}"
            time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return log.read_text(errors="replace")


def test_under_dg_dev_a_chunked_exports_planner_runs_by_itself_and_the_export_publishes(project: Path) -> None:
    """The newcomer's dead end (issue 34): the planner was STOPPED by default, and the guide's
    `dagster sensor start … -m` stored it under another location than `dg dev` serves, so
    nothing ever ran. Now `dg dev` alone registers the windows and publishes the export."""
    folder = project / "src/shop_pipeline/defs/chunks"
    folder.mkdir()
    (folder / "defs.yaml").write_text("type: rivet_dagster.RivetExportsComponent\nattributes:\n  config: rivet.yaml\n")
    out = project / "out" / "orders_chunked"
    (folder / "rivet.yaml").write_text(
        f"source: {{type: sqlite, url: 'sqlite:///{project / SHOP / 'data' / 'shop.db'}'}}\n"
        "exports:\n  - name: orders_chunked\n    table: orders\n    mode: chunked\n    chunk_column: id\n"
        f"    chunk_size: 1000\n    format: parquet\n    destination: {{type: local, path: '{out}'}}\n")
    _dg_dev_until(project, lambda: (out / "_SUCCESS").is_file())

    manifest = json.loads((out / "manifest.json").read_text())
    with sqlite3.connect(project / SHOP / "data" / "shop.db") as conn:
        source_ids = sorted(r[0] for r in conn.execute("SELECT id FROM orders"))
    ids = sorted(i for p in manifest["parts"] for i in pq.read_table(out / p["path"])["id"].to_pylist())
    assert ids == source_ids


@pytest.mark.parametrize(("break_it", "names", "once"), [
    (lambda p: (p / SHOP / "defs.yaml").write_text(
        "type: rivet_dagster.RivetExportsComponent\nattributes:\n  confg: rivet.yaml\n"), ["confg", "defs.yaml"],
     "attributes.confg Additional properties are not allowed"),
    (lambda p: (p / SHOP / "rivet.yaml").write_text(
        (p / SHOP / "rivet.yaml").read_text().replace("format: parquet", "formt: parquet", 1)),
     ["formt", "rivet.yaml"], "unknown field `formt` at exports[0]"),
], ids=["wrong attribute in defs.yaml", "unknown key in rivet.yaml"])
def test_bad_input_fails_dg_check_defs_in_one_message_naming_the_field_and_the_file_and_writes_nothing(
        project: Path, break_it, names: list[str], once: str) -> None:  # noqa: ANN001
    break_it(project)
    before = sorted(p.relative_to(project) for p in project.rglob("*") if ".dagster_home" not in p.parts)
    proc = dg(project, "check", "defs", check=False)
    assert proc.returncode != 0
    said = proc.stdout + proc.stderr
    for name in names:
        assert name in said, f"{name!r} not named in:\n{said[-3000:]}"
    # one message: not the same problems again under "The above exception was caused by" (issue 34)
    assert said.count(once) == 1 and "Traceback" not in said, said[-4000:]
    after = sorted(p.relative_to(project) for p in project.rglob("*")
                   if ".dagster_home" not in p.parts and "__pycache__" not in p.parts)
    assert [p for p in after if p not in before and "__pycache__" not in p.parts] == []


@pytest.mark.parametrize(("users_own", "names"), [
    ('@dg.asset(key=["shop", "customers"])\ndef my_customers() -> None: ...\n',
     ["export 'customers'", "asset key 'shop/customers'", "`my_customers`", "analytics.py", "key_prefix"]),
    ('@dg.asset(key=["sqlite", "shop", "orders"])\ndef orders_table() -> None: ...\n',
     ["the source table asset", "'sqlite/shop/orders'", "`orders_table`", "source_assets: false"]),
    ('customers_job = dg.define_asset_job("shop__customers_job", selection="revenue_by_customer")\n',
     ["export 'customers'", "job 'shop__customers_job'", "`customers_job`", "key_prefix"]),
], ids=["export key", "source table key", "job name"])
def test_a_clash_with_the_users_own_definitions_names_the_rivet_yaml_the_export_and_the_fix(
        project: Path, users_own: str, names: list[str]) -> None:
    """Not Dagster's bare `Duplicate asset key` (issue 34): the message names the component's
    defs.yaml and rivet.yaml, the export, the user's module and object, and what resolves it."""
    analytics = project / "src/shop_pipeline/defs/analytics.py"
    analytics.write_text(analytics.read_text() + "\n\n" + users_own)
    if "define_asset_job" in users_own:  # rivet defines a job per export only when asked to
        config = project / SHOP / "rivet.yaml"
        config.write_text(config.read_text() + "\ndagster:\n  jobs: per_export\n")
    before = sorted(p.relative_to(project) for p in project.rglob("*") if ".dagster_home" not in p.parts)
    proc = dg(project, "check", "defs", check=False)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Duplicate" not in said, said[-4000:]
    for name in [str(project / SHOP / "defs.yaml"), "rivet.yaml", *names]:
        assert name in said, f"{name!r} not named in:\n{said[-3000:]}"
    after = sorted(p.relative_to(project) for p in project.rglob("*")
                   if ".dagster_home" not in p.parts and "__pycache__" not in p.parts)
    assert [p for p in after if p not in before and "__pycache__" not in p.parts] == []


def test_the_built_wheel_installs_into_a_fresh_venv_and_its_component_loads_in_a_dg_project(
        project: Path, tmp_path: Path) -> None:
    """The package as a user gets it: a wheel (with py.typed and the dg entry point), its
    declared ranges resolved by the installer (held to the lock's versions so the test is
    fast and offline-cached), in a venv that is not the project's."""
    uv = VENV_BIN / "uv"
    dist = tmp_path / "dist"
    subprocess.run([str(uv), "build", "--wheel", "-q", "-o", str(dist), str(REPO)], check=True, timeout=600,
                   capture_output=True)
    wheel = next(dist.glob("rivet_dagster-*.whl"))
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    assert "rivet_dagster/py.typed" in names and "rivet_dagster/component.py" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "dagster_dg_cli.registry_modules" in zipfile.ZipFile(wheel).read(entry_points).decode()

    venv = tmp_path / "user-venv"
    subprocess.run([str(uv), "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=300)
    subprocess.run([str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "-c", str(REPO / "requirements.lock"), f"{wheel}[dg]"], check=True, timeout=900,
                   capture_output=True)
    proc = dg(project, "check", "defs", bin_dir=venv / "bin")
    assert "All definitions loaded successfully" in proc.stdout + proc.stderr
