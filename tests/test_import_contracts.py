"""The import contracts in `.importlinter` hold on the tree, and each one fails on a planted
violation (issue 18 item 4), so a contract that checks nothing cannot pass for a kept one.

One `lint-imports` run on the tree, one on a copy of the packages with a violation of every
contract planted (about 10 s each: grimp builds the whole import graph).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
CONTRACTS = {
    "rivet_core never imports Dagster": ("rivet_core/pipeline/retention/gc.py", "import dagster\n"),
    "rivet_dagster imports rivet_core only through rivet_core.api": (
        "rivet_dagster/naming.py", "from rivet_core.pipeline.single import job\n"),
    "only the facades (and their homes) import the state writers and the manifest": (
        "rivet_core/pipeline/single/job.py", "from rivet_core.manifest.artifacts import write_manifest_files\n"),
    "the building blocks and the configuration never import the pipeline, the operator tools or the CLI": (
        "rivet_core/format/csv.py", "from rivet_core.cli import shared\n"),
    "rivet_core is layered": ("rivet_core/config/sizes.py", "from rivet_core.source import retry\n"),
    "the chunk planner's decision and the partition key codec import no Dagster": (
        "rivet_dagster/planner.py", "import dagster\n"),
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
    assert "rivet_core.pipeline.retention.gc -> dagster" in out
    assert "rivet_dagster.naming -> rivet_core.pipeline.single.job" in out
    assert "rivet_core.pipeline.single.job -> rivet_core.manifest.artifacts" in out
    assert "rivet_core.format.csv -> rivet_core.cli.shared" in out
    assert "rivet_core.config.sizes -> rivet_core.source.retry" in out
    assert "rivet_dagster.planner -> dagster" in out


#: The one way rivet_core may spell the integration: its distribution in a pip install hint.
ALLOWED_MENTION = re.compile(r"pip install '?rivet-dagster")


def dagster_mentions(root: Path) -> list[str]:
    """Every line of rivet_core/**/*.py that says "dagster" (any case) outside an install hint."""
    hits = []
    for path in sorted((root / "rivet_core").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if "dagster" in ALLOWED_MENTION.sub("", line).lower():
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def test_rivet_core_never_names_dagster_not_even_in_words() -> None:
    """Imports are lint-imports' job; this is the text: docstrings, comments, messages, column
    and key names. The core speaks of an orchestrator or an integration (docs/architecture.md)."""
    hits = dagster_mentions(ROOT)
    assert not hits, "rivet_core names Dagster — use neutral words, or move it to rivet_dagster:\n" + "\n".join(hits)


def test_the_word_scan_flags_a_mention_and_allows_only_the_install_hint(tmp_path: Path) -> None:
    core = tmp_path / "rivet_core"
    core.mkdir()
    (core / "hint.py").write_text("MSG = \"pip install 'rivet-dagster[s3]' or pip install rivet-dagster\"\n")
    (core / "word.py").write_text("\"\"\"Runs a Dagster asset.\"\"\"\nDAGSTER_RUN = 1\n")
    assert dagster_mentions(tmp_path) == ['rivet_core/word.py:1: """Runs a Dagster asset."""',
                                          "rivet_core/word.py:2: DAGSTER_RUN = 1"]


def import_circles(graph: Any) -> list[list[str]]:
    """The import circles of `graph` (grimp): its strongly connected components of more than
    one module, each sorted. Every import counts — at module level, inside a function or
    under TYPE_CHECKING — because each is a dependency a reader has to hold in mind."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circles_in_the_packages_or_the_benchmarks() -> None:
    """Issue 18 item 1: rivet_core, rivet_dagster and benchmarks import without a circle."""
    import grimp

    graph = grimp.build_graph("rivet_core", "rivet_dagster", "benchmarks")
    assert import_circles(graph) == []


def test_the_circle_finder_finds_a_planted_circle() -> None:
    import grimp

    graph = grimp.ImportGraph()
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"), ("p.d", "p.e")]:
        graph.add_import(importer=importer, imported=imported)
    assert import_circles(graph) == [["p.a", "p.b", "p.c"]]
