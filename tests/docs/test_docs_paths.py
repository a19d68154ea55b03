"""The docs name only files that exist, and link only to sections that exist.

`docs/*.md` and README.md cite repository paths in backticks (`rivet_core/pipeline/facade/commit.py`,
`tests/pipeline/test_facades.py`) and link to each other (`[x](operations.md#exit-codes)`).
Files move (issue 18 moved the CLI, the sources and the facades into packages); a doc that
still names the old place sends a reader nowhere. This test fails naming the document, the
line and the path or anchor that is gone.

What counts as a path: a backticked token that starts with one of the repository's top-level
directories and has no spaces or placeholders (`<…>`, `{…}`, `*`). A trailing `:line` or
`::name` is ignored, and so is a file git ignores (made by a command: the demo database); a module path may also be written dotted (`rivet_core.pipeline.single.job`),
which is checked as a module or package.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
TOP = ("rivet_core/", "rivet_dagster/", "tests/", "docs/", "benchmarks/", "scripts/", "examples/")
BACKTICK = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"^(rivet_core|rivet_dagster)(\.[A-Za-z_][A-Za-z0-9_]*)+$")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces → '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    lines = doc.read_text().splitlines()
    fenced, out = False, set()
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(_anchor(line.lstrip("#")))
    return out


def _generated(path: str) -> bool:
    """A file a command creates (the demo database, benchmark results): git ignores it."""
    return subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", path], check=False).returncode == 0


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in (len(parts), len(parts) - 1):  # `pkg.module` or `pkg.module.attr`
        if cut < 2 and len(parts) > 1:
            continue
        base = REPO.joinpath(*parts[:cut])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


def problems_of(doc: Path) -> list[str]:
    rel = doc.relative_to(REPO)
    found = []
    for lineno, line in enumerate(doc.read_text().splitlines(), 1):
        for token in BACKTICK.findall(line):
            token = token.strip()
            if DOTTED.match(token):
                if not _module_exists(token):
                    found.append(f"{rel}:{lineno}: module `{token}` does not exist")
                continue
            if not token.startswith(TOP) or re.search(r"[\s<>{}*…]|\.\.\.", token):
                continue
            path = re.split(r"::|:(?=\d)", token)[0].rstrip("/.,")
            if not (REPO / path).exists() and not _generated(path):
                found.append(f"{rel}:{lineno}: `{token}` does not exist")
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):  # http(s):, mailto:
                continue
            file, _, anchor = target.partition("#")
            linked = (doc.parent / file).resolve() if file else doc
            if not linked.exists():
                found.append(f"{rel}:{lineno}: link to {file} — no such file")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                found.append(f"{rel}:{lineno}: link to {target} — {linked.name} has no such section")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_path_and_link_in_the_docs_exists(doc: Path) -> None:
    problems = problems_of(doc)
    assert not problems, "\n".join(problems)


def test_the_checker_sees_a_moved_file_and_a_dead_anchor(tmp_path: Path) -> None:
    doc = REPO / "docs" / "_planted_test_doc.md"
    doc.write_text("See `rivet_core/cli_gone.py` and `rivet_core.nowhere.mod`, and "
                   "[ops](operations.md#no-such-section), but `rivet_core/api.py` is fine.\n")
    try:
        problems = problems_of(doc)
    finally:
        doc.unlink()
    assert len(problems) == 3, problems
