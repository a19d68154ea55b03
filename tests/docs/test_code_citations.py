"""Every citation in code points at something a clone of this repository can read.

Comments, docstrings and messages in `rivet_core/`, `rivet_dagster/`, `benchmarks/`,
`tests/` and `scripts/` explain *why* by citing a document. A citation of a team document
that is not in the repository (`DESIGN.md`, "reference §3.5", `shared/…`, Rivet's seed ADR
numbers) sends a maintainer nowhere, so this test fails on one, naming the file, the line
and the fix. It also checks that what the code does cite exists:

- an invariant code (`I3`, `M9`, `PG2`) must be defined in docs/invariants.md (a bold
  `**CODE**` there);
- `ADR-NNNN` must have its file `docs/adr/NNNN-*.md`;
- a `docs/….md` path must exist, and a section quoted right after it
  (`docs/operations.md "Exit codes"`) must be a heading of that file.

Only comments and string literals of Python files are scanned (found with `ast`) (an identifier such as a
Hypothesis strategy named `I64` is code, not a citation); shell and C files are scanned
whole. The scanner itself is tested on planted citations below, so a scanner that finds
nothing cannot pass for a clean tree.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("rivet_core", "rivet_dagster", "benchmarks", "tests", "scripts")
SUFFIXES = (".py", ".sh", ".c", ".h")
INVARIANTS = ROOT / "docs" / "invariants.md"

#: Citations of documents outside the repository, and what to cite instead.
OUTSIDE = [
    (re.compile(r"\bDESIGN\.md\b"), "DESIGN.md is not in the repository: cite docs/architecture.md, "
                                    "docs/invariants.md or a docs/adr/ file"),
    (re.compile(r"\bSTYLE\.md\b"), "STYLE.md is not in the repository: cite README.md or docs/"),
    (re.compile(r"\breference\s*§", re.I), "\"reference §\" is not in the repository: cite "
                                           "docs/rivet-compat.md \"<section>\" or another docs/ page"),
    (re.compile(r"\b(state-and-trust|config-and-modes)\b"),
     "Rivet's reference notes are not in the repository: cite docs/rivet-compat.md"),
    (re.compile(r"(?<![\w.])shared/(seeds|reference|DESIGN|STYLE)|/work/shared\b"),
     "shared/ is not in the repository: cite a docs/ page"),
    (re.compile(r"\bin the seeds\b|\bseed ADR\b", re.I), "the seed ADRs are not in the repository: "
                                                         "cite docs/adr/ or docs/invariants.md"),
]
#: A bare section sign is a reference-document citation unless the line names a URL.
SECTION_SIGN = re.compile(r"§")
ADR = re.compile(r"\bADR[- ]?(\d{1,4})\b")
CODE = re.compile(r"\b(I|M|PG)(\d{1,2})\b")
DOC_PATH = re.compile(r"\b(docs/[\w./-]+?\.md)\b(?:(?:\s+|:\s*)\"([^\"\n]+)\")?")


def _defined_codes() -> set[str]:
    return set(re.findall(r"\*\*((?:I|M|PG)\d{1,2})\*\*", INVARIANTS.read_text()))


@functools.cache
def _headings(doc: Path) -> list[str]:
    return [re.sub(r"[`*]", "", line.lstrip("#").strip()).lower()
            for line in doc.read_text().splitlines() if line.startswith("#")]


_ANY = re.compile("|".join([p.pattern for p, _ in OUTSIDE] + ["§", ADR.pattern, CODE.pattern,
                                                              DOC_PATH.pattern]))


def _prose(path: Path, text: str) -> list[tuple[int, str]]:
    """(line number, text) of the comments and string literals (Python) or every line (others).

    A line inside a string literal (docstrings, messages) is taken whole; elsewhere only what
    follows a `#`. `ast` is used rather than `tokenize` (pure Python, ten times slower), and
    a file with no candidate anywhere is not parsed at all."""
    if not _ANY.search(text):
        return []
    lines = text.splitlines()
    if path.suffix != ".py":
        return list(enumerate(lines, 1))
    in_string: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            in_string.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return [(n, line if n in in_string else line[line.index("#"):])
            for n, line in enumerate(lines, 1) if n in in_string or "#" in line]


def scan(path: Path, text: str, codes: set[str], root: Path = ROOT) -> list[str]:
    """Every problem of one file: `path:line: what — fix`."""
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    problems = []
    for lineno, line in _prose(path, text):
        if not _ANY.search(line):
            continue
        where = f"{rel}:{lineno}"
        for pattern, fix in OUTSIDE:
            if pattern.search(line):
                problems.append(f"{where}: {line.strip()!r} — {fix}")
        if SECTION_SIGN.search(line) and "http" not in line and not any(p.search(line) for p, _ in OUTSIDE):
            problems.append(f"{where}: {line.strip()!r} — a bare § cites a document outside the "
                            "repository: name the docs/ page and its section instead")
        for m in ADR.finditer(line):
            number = int(m.group(1))
            if not list((root / "docs" / "adr").glob(f"{number:04d}-*.md")):
                problems.append(f"{where}: {m.group(0)} has no docs/adr/{number:04d}-*.md — cite "
                                "an ADR of this repository, or write one")
        for m in CODE.finditer(line):
            if m.group(0) not in codes:
                problems.append(f"{where}: invariant code {m.group(0)} is not defined in "
                                "docs/invariants.md — define it there or cite a defined one")
        for m in DOC_PATH.finditer(line):
            doc = root / m.group(1)
            if not doc.is_file():
                problems.append(f"{where}: {m.group(1)} does not exist")
            elif m.group(2):
                wanted = re.sub(r"[`*]", "", m.group(2)).lower()
                if not any(h.startswith(wanted) for h in _headings(doc)):
                    problems.append(f"{where}: {m.group(1)} has no section {m.group(2)!r}")
    return problems


def _files() -> list[Path]:
    me = Path(__file__).resolve()
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*")
                  if p.suffix in SUFFIXES and p.is_file() and p.resolve() != me
                  and "node_modules" not in p.parts and ".venv" not in p.parts)


def test_every_citation_in_code_points_into_the_repository() -> None:
    codes = _defined_codes()
    files = _files()
    assert len(files) > 100, f"the scan found only {len(files)} files under {SCANNED}"
    problems = [p for f in files for p in scan(f, f.read_text(errors="replace"), codes)]
    assert not problems, "citations that lead outside the repository:\n" + "\n".join(problems)


def test_invariants_page_defines_the_write_ordering_codes() -> None:
    codes = _defined_codes()
    expected = {f"I{n}" for n in range(1, 9)} | {f"M{n}" for n in range(1, 10)} | {"PG2"}
    assert expected <= codes, f"docs/invariants.md does not define {sorted(expected - codes)}"
    assert "amendment" in INVARIANTS.read_text().lower()


@pytest.mark.parametrize(("text", "needle"), [
    ('"""Exit codes (reference §3.5)."""\n', "reference §"),
    ("# see DESIGN.md §2\nx = 1\n", "DESIGN.md"),
    ('"""Resume (§3.6 step 2)."""\n', "bare §"),
    ("# the builder facades (ADR-0018)\n", "ADR-0018"),
    ('"""I9 forbids it."""\n', "I9"),
    ('"""PG7 says so."""\n', "PG7"),
    ("# notes in shared/reference/x.md\n", "shared/"),
    ('"""see docs/no-such-page.md"""\n', "does not exist"),
    ('"""see docs/operations.md "No such section"."""\n', "no section"),
])
def test_scanner_finds_planted_citations(tmp_path: Path, text: str, needle: str) -> None:
    planted = tmp_path / "planted.py"
    problems = scan(planted, text, _defined_codes())
    assert any(needle in p for p in problems), problems


@pytest.mark.parametrize("text", [
    "I64 = 1  # a name, not a citation\n",
    '"""Rules of https://sqlite.org/datatype3.html §3.1, I3 and M9 (docs/invariants.md)."""\n',
    '"""Exit codes: docs/operations.md "Exit codes"; docs/adr/0001-write-ordering-facades.md."""\n',
    "# ADR-0001 keeps the order\n",
])
def test_scanner_accepts_citations_into_the_repository(tmp_path: Path, text: str) -> None:
    planted = tmp_path / "planted.py"
    assert scan(planted, text, _defined_codes()) == []
