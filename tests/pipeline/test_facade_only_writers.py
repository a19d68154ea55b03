"""The facades are the only writers (docs/adr/0001-write-ordering-facades.md, issue 15 item 6).

An AST scan over every module of `rivet_core/` and `rivet_dagster/`: a module outside the
allow-list below that writes the file log, the cursor, the progression, the metrics, the
manifest, a state table, or a run's drift verdict fails this test, which names the module,
the line and the rule. The ordering of those writes lives in the facades; a write anywhere
else is a second copy of the sequence that will drift from the first (docs/adr/0001-write-ordering-facades.md, Context).

How a write is recognised (no import of the scanned code, so nothing runs):
- a reference to a writer — `x.record_durable_part(…)`, `write_manifest_files`, also passed
  as a callback, imported under another name, or named in `getattr(x, "…")`;
- a manifest object written by key (`write_bytes` / `write_file` whose key is
  `MANIFEST_KEY`, `SUCCESS_KEY`, `run_manifest_key(…)` or a literal manifest name);
- a state table written through SQLAlchemy (`file_log.insert()`, `sa.update(run_status)`,
  `pg_insert(export_state)`) or raw SQL text (`INSERT INTO file_log`);
- an assignment to `.schema_changed` / `.schema_changes` / `.schema_gate`;
- a table commit: `commit_table` / `commit_repair` (rivet_core/tableformat/) outside the finalize
  facades (a run's, a repair's), or a
  delta-rs writer (`create_write_transaction`, `create_table_with_add_actions`,
  `write_deltalake`) or a pyiceberg one (`create_table_transaction`, `add_files`,
  `commit_transaction`) outside rivet_core/tableformat/.

The writers' own definitions (the state store, the manifest package) are their home and are
not scanned for the rule that names them. The scanner is tested on planted violations, so a
scanner that finds nothing cannot pass for a clean tree.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("rivet_core", "rivet_dagster")

STATE_TABLES = frozenset({
    "chunk_run", "chunk_task", "export_lock", "export_metrics", "export_progression", "export_schema",
    "export_state", "file_log", "rivet_schema_version", "run_journal", "run_status",
})
MANIFEST_KEY_NAMES = frozenset({"MANIFEST_KEY", "SUCCESS_KEY", "run_manifest_key"})
MANIFEST_LITERAL = re.compile(r"^(manifest\.json|_SUCCESS|manifest-.*\.json)$")
SQL_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?(" + "|".join(sorted(STATE_TABLES)) + r")\b")
VERDICT_FIELDS = frozenset({"schema_changed", "schema_changes", "schema_gate"})


@dataclass(frozen=True)
class Rule:
    name: str
    writers: frozenset[str]
    #: Modules (repository-relative paths, or folders ending in "/") allowed to write.
    facades: tuple[str, ...]
    #: Where the writers are defined: exempt for this rule only.
    home: tuple[str, ...] = ()


FILE_LOG = Rule("file log", frozenset({"record_durable_part"}), ("rivet_core/pipeline/facade/commit.py",),
                ("rivet_core/state/",))
CURSOR = Rule("cursor", frozenset({"set_cursor", "reset_export"}), ("rivet_core/pipeline/facade/run_store.py",),
              ("rivet_core/state/",))
PROGRESSION = Rule("progression",
                   frozenset({"record_committed_incremental", "record_committed_chunked", "record_verified_chunked"}),
                   ("rivet_core/pipeline/facade/run_store.py",), ("rivet_core/state/",))
METRICS = Rule("metrics", frozenset({"record_metric"}), ("rivet_core/pipeline/facade/finalize.py",), ("rivet_core/state/",))
MANIFEST = Rule("manifest", frozenset({"write_manifest_files", "serialize_manifest", "success_marker_body"}),
                ("rivet_core/pipeline/facade/finalize.py", "rivet_core/pipeline/facade/finalize_repair.py"),
                ("rivet_core/manifest/artifacts.py", "rivet_core/manifest/model.py"))
STATE_TABLE = Rule("state table", frozenset(), ("rivet_core/state/",))
DRIFT_VERDICT = Rule("drift verdict", frozenset(), ("rivet_core/pipeline/facade/schema_drift.py",))
#: `table_format:` exports: the table commit is a step of the finalize facade (between the
#: parts and the manifest, docs/adr/0009-table-formats.md); the delta-rs writers live in
#: rivet_core/tableformat/ and nothing else may commit to a table.
TABLE_COMMIT = Rule("table commit",
                    frozenset({"commit_table", "commit_repair", "create_write_transaction",
                               "create_table_with_add_actions", "write_deltalake", "create_table_transaction",
                               "add_files", "commit_transaction"}),
                    ("rivet_core/pipeline/facade/finalize.py", "rivet_core/pipeline/facade/finalize_repair.py"),
                    ("rivet_core/tableformat/",))
RULES = (FILE_LOG, CURSOR, PROGRESSION, METRICS, MANIFEST, STATE_TABLE, DRIFT_VERDICT, TABLE_COMMIT)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    rule: Rule
    what: str

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}: [{self.rule.name}] {self.what} — only "
                f"{', '.join(self.rule.facades)} may write the {self.rule.name}")


def _matches(path: str, places: tuple[str, ...]) -> bool:
    return any(path.startswith(p) if p.endswith("/") else path == p for p in places)


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _mentions(node: ast.AST, names: frozenset[str]) -> bool:
    return any(_name_of(n) in names for n in ast.walk(node))


class _Scanner(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.found: list[Violation] = []
        self.aliases: dict[str, str] = {}  # local name → writer it stands for

    def hit(self, node: ast.AST, rule: Rule, what: str) -> None:
        self.found.append(Violation(self.path, getattr(node, "lineno", 0), rule, what))

    def writer_rule(self, name: str | None) -> Rule | None:
        name = self.aliases.get(name, name) if name else None
        return next((r for r in RULES if name in r.writers), None)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.asname and self.writer_rule(alias.name) is not None:
                self.aliases[alias.asname] = alias.name

    def visit_Attribute(self, node: ast.Attribute) -> None:
        rule = self.writer_rule(node.attr)
        if rule is not None:
            self.hit(node, rule, f"uses `.{node.attr}`")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        rule = self.writer_rule(node.id)
        if rule is not None:
            self.hit(node, rule, f"uses `{self.aliases.get(node.id, node.id)}`")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _name_of(func)
        args = [*node.args, *(k.value for k in node.keywords)]
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            rule = self.writer_rule(str(node.args[1].value))
            if rule is not None:
                self.hit(node, rule, f"uses getattr(…, {node.args[1].value!r})")
        if name in ("write_bytes", "write_file") and any(
                _mentions(a, MANIFEST_KEY_NAMES)
                or (isinstance(a, ast.Constant) and isinstance(a.value, str) and MANIFEST_LITERAL.match(a.value))
                for a in args):
            self.hit(node, MANIFEST, f"writes a manifest object with `{name}`")
        if name in ("insert", "update", "delete") and isinstance(func, ast.Attribute) \
                and _name_of(func.value) in STATE_TABLES:
            self.hit(node, STATE_TABLE, f"writes `{_name_of(func.value)}` with `.{name}()`")
        if name in ("insert", "update", "delete", "pg_insert", "sqlite_insert") \
                and any(_name_of(a) in STATE_TABLES for a in node.args):
            table = next(_name_of(a) for a in node.args if _name_of(a) in STATE_TABLES)
            self.hit(node, STATE_TABLE, f"writes `{table}` with `{name}(…)`")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            found = SQL_WRITE.search(node.value)
            if found:
                self.hit(node, STATE_TABLE, f"writes `{found.group(1)}` in SQL text")

    def _targets(self, node: ast.AST, targets: list[ast.expr]) -> None:
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Attribute) and n.attr in VERDICT_FIELDS and isinstance(n.ctx, ast.Store):
                    self.hit(node, DRIFT_VERDICT, f"sets `.{n.attr}`")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)


def scan_source(source: str, path: str) -> tuple[list[Violation], list[Violation]]:
    """(violations, allowed writes) of one module; `path` is repository-relative."""
    scanner = _Scanner(path)
    scanner.visit(ast.parse(source, filename=path))
    violations, allowed = [], []
    for v in scanner.found:
        if _matches(path, v.rule.home):
            continue
        (allowed if _matches(path, v.rule.facades) else violations).append(v)
    return violations, allowed


def scan_tree(root: Path = ROOT) -> tuple[list[Violation], list[Violation]]:
    violations: list[Violation] = []
    allowed: list[Violation] = []
    for package in SCANNED:
        for file in sorted((root / package).rglob("*.py")):
            rel = file.relative_to(root).as_posix()
            found, ok = scan_source(file.read_text(encoding="utf-8"), rel)
            violations += found
            allowed += ok
    return violations, allowed


# --------------------------------------------------------------------------- the tree
def test_no_module_outside_the_facades_writes_what_a_facade_owns() -> None:
    violations, _ = scan_tree()
    assert not violations, "writes outside the facades:\n" + "\n".join(map(str, violations))


def test_every_facade_on_the_allow_list_still_writes_what_it_is_allowed_to() -> None:
    """A stale allow-list entry would let a new module of that name write unnoticed."""
    _, allowed = scan_tree()
    used = {(v.rule.name, v.path if not v.path.startswith("rivet_core/state/") else "rivet_core/state/")
            for v in allowed}
    expected = {(r.name, f) for r in RULES for f in r.facades}
    assert expected - used == set()


def test_the_scan_covers_both_packages() -> None:
    files = [f for p in SCANNED for f in (ROOT / p).rglob("*.py")]
    assert any("rivet_dagster" in f.parts for f in files) and len(files) > 50


# -------------------------------------------------------------------- planted violations
PLANTED = [
    ("file log", "def f(state):\n    state.record_durable_part(run_id='r', export_name='e', file_name='x')\n", 2),
    ("cursor", "def f(state):\n    state.set_cursor('e', '42')\n", 2),
    ("cursor", "def f(store):\n    return store.reset_export('e')\n", 2),
    ("progression", "def f(s):\n    s.record_committed_chunked('e', 3, 'r')\n", 2),
    ("progression", "def f(s):\n    s.record_verified_chunked('e', 3, 'r')\n", 2),
    ("progression", "def f(s):\n    s.record_committed_incremental('e', '9', 'r')\n", 2),
    ("metrics", "def f(state, row):\n    steps = [state.record_metric]\n    steps[0](row)\n", 2),
    ("manifest", "from rivet_core.manifest import write_manifest_files\n\ndef f(d, m):\n"
                 "    write_manifest_files(d, m)\n", 4),
    ("manifest", "from rivet_core.manifest import write_manifest_files as w\n\ndef f(d, m):\n    w(d, m)\n", 4),
    ("manifest", "from rivet_core.manifest import MANIFEST_KEY\n\ndef f(d, b):\n    d.write_bytes(b, MANIFEST_KEY)\n", 4),
    ("manifest", "def f(d, b, run):\n    d.write_bytes(b, run_manifest_key(run))\n", 2),
    ("manifest", "def f(d, b):\n    d.write_bytes(b, '_SUCCESS')\n", 2),
    ("manifest", "def f(d, m):\n    return serialize_manifest(m)\n", 2),
    ("cursor", "def f(state):\n    getattr(state, 'set_cursor')('e', '1')\n", 2),
    ("state table", "from rivet_core.state.schema import run_status\n\ndef f(conn):\n"
                    "    conn.execute(run_status.insert().values(run_id='x'))\n", 4),
    ("state table", "import sqlalchemy as sa\n\ndef f(conn, file_log):\n"
                    "    conn.execute(sa.update(file_log).values(bytes=0))\n", 4),
    ("state table", "def f(conn):\n    conn.exec_driver_sql(\n        'DELETE FROM export_metrics WHERE 1=1')\n", 3),
    ("drift verdict", "def f(summary):\n    summary.schema_changed = False\n", 2),
    ("table commit", "from rivet_core.tableformat import commit_table\n\ndef f(p, s, d):\n"
                     "    commit_table(p, s, d)\n", 4),
    ("table commit", "from rivet_core.tableformat.repair import commit_repair\n\ndef f(p, s, d, parts):\n"
                     "    commit_repair(p, s, d, parts)\n", 4),
    ("table commit", "def f(table, actions, schema):\n    table.create_write_transaction(actions, 'append', schema)\n", 2),
    ("table commit", "from deltalake import write_deltalake\n\ndef f(uri, data):\n    write_deltalake(uri, data)\n", 4),
    ("table commit", "def f(tx, paths):\n    tx.add_files(paths)\n    return None\n", 2),
    ("drift verdict", "def f(summary):\n    summary.schema_gate, x = 'checked', 1\n", 2),
]


@pytest.mark.parametrize(("rule", "source", "line"), PLANTED, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(PLANTED)])
def test_a_planted_write_outside_the_facades_is_named_by_module_line_and_rule(rule, source, line) -> None:  # noqa: ANN001
    for path in ("rivet_core/pipeline/rogue.py", "rivet_dagster/rogue.py"):
        violations, _ = scan_source(source, path)
        assert [(v.rule.name, v.line) for v in violations] == [(rule, line)], violations
        text = str(violations[0])
        assert text.startswith(f"{path}:{line}: [{rule}]") and "may write" in text


@pytest.mark.parametrize(("rule", "source", "line"), PLANTED, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(PLANTED)])
def test_the_same_write_inside_its_facade_is_allowed(rule, source, line) -> None:  # noqa: ANN001
    facade = next(r for r in RULES if r.name == rule).facades[0]
    path = facade + "planted.py" if facade.endswith("/") else facade
    violations, allowed = scan_source(source, path)
    assert violations == [] and [v.rule.name for v in allowed] == [rule]


def test_a_write_of_one_kind_in_the_facade_of_another_is_still_a_violation() -> None:
    violations, _ = scan_source("def f(state):\n    state.set_cursor('e', '1')\n", "rivet_core/pipeline/facade/commit.py")
    assert [str(v).split(" — ")[0] for v in violations] == [
        "rivet_core/pipeline/facade/commit.py:2: [cursor] uses `.set_cursor`"]


def test_reads_and_prose_are_not_writes() -> None:
    source = ('"""The cursor is written by RunStore; update file_log rows? never here."""\n'
              "from rivet_core.manifest import MANIFEST_KEY, read_manifest\n\n"
              "def f(state, dest, summary):\n"
              "    state.get_cursor('e'); state.list_metrics('e'); read_manifest(dest)\n"
              "    dest.read_bytes(MANIFEST_KEY)\n"
              "    return summary.schema_changed is None, 'SELECT * FROM file_log'\n")
    assert scan_source(source, "rivet_core/pipeline/rogue.py") == ([], [])


def test_the_scanner_fails_the_tree_test_on_a_planted_module(tmp_path: Path) -> None:
    """End to end: a copy of the tree with one rogue module makes the tree scan fail."""
    for package in SCANNED:
        for file in (ROOT / package).rglob("*.py"):
            target = tmp_path / file.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(file.read_text(encoding="utf-8"), encoding="utf-8")
    assert scan_tree(tmp_path)[0] == []
    (tmp_path / "rivet_dagster" / "rogue.py").write_text(
        "def write(store, export_name):\n    store.set_cursor(export_name, '0')\n", encoding="utf-8")
    assert [str(v).split(" — ")[0] for v in scan_tree(tmp_path)[0]] == [
        "rivet_dagster/rogue.py:2: [cursor] uses `.set_cursor`"]
