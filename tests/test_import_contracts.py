"""The import contracts in `.importlinter` hold on the tree, and each one fails on a planted
violation (issue 18 item 4), so a contract that checks nothing cannot pass for a kept one.

One `lint-imports` run on the tree, one on a copy of the packages with a violation of every
contract planted (about 10 s each: grimp builds the whole import graph).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = {
    "rivet_core never imports Dagster": ("rivet_core/pipeline/gc.py", "import dagster\n"),
    "rivet_dagster imports rivet_core only through rivet_core.api": (
        "rivet_dagster/naming.py", "from rivet_core.pipeline import job\n"),
    "only the facades (and their homes) import the state writers and the manifest": (
        "rivet_core/pipeline/job.py", "from rivet_core.manifest.artifacts import write_manifest_files\n"),
    "the building blocks and the configuration never import the pipeline, the operator tools or the CLI": (
        "rivet_core/format/csv.py", "from rivet_core.cli import shared\n"),
}


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} missing — install the dev dependencies (scripts/bootstrap.sh)"
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / ".importlinter"), "--no-cache"],
                          cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PATH": str(LINT_IMPORTS.parent), "PYTHONPATH": str(root)})


def test_the_tree_keeps_every_contract() -> None:
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in proc.stdout


def test_a_planted_violation_of_each_contract_breaks_it(tmp_path: Path) -> None:
    for package in ("rivet_core", "rivet_dagster"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    for module, line in CONTRACTS.values():
        target = tmp_path / module
        target.write_text(target.read_text(encoding="utf-8") + line, encoding="utf-8")
    proc = lint_imports(tmp_path)
    out = " ".join(proc.stdout.split())  # the report wraps long contract names
    assert proc.returncode == 1, out
    assert f"Contracts: 0 kept, {len(CONTRACTS)} broken." in out
    assert "rivet_core.pipeline.gc -> dagster" in out
    assert "rivet_dagster.naming -> rivet_core.pipeline.job" in out
    assert "rivet_core.pipeline.job -> rivet_core.manifest.artifacts" in out
    assert "rivet_core.format.csv -> rivet_core.cli.shared" in out
