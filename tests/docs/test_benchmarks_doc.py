"""docs/benchmarks.md survives `make bench`.

The harness rewrites the report at the top of docs/benchmarks.md from its run and keeps only
the `<!-- NAME:begin -->` … `<!-- NAME:end -->` blocks below it (benchmarks/report.py
`write_report`, `kept_sections`). A hand-written analysis outside a block would be dropped
by the next full benchmark run, with no diff anyone reviews; this test keeps every section
after the generated report inside a block, and the block names unique.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.report import kept_sections

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmarks.md"
#: The last paragraph the harness writes (benchmarks/report.py `write_report`).
GENERATED_END = "\nCaveats: client and server share the machine's cores"


def test_everything_after_the_generated_report_is_in_a_kept_block() -> None:
    text = DOC.read_text()
    end = text.index(GENERATED_END)
    after = text[text.index("\n", end + 1):]
    leftover = after
    for block in kept_sections(text):
        leftover = leftover.replace(block, "", 1)
    stray = [line for line in leftover.splitlines() if line.strip()]
    assert stray == [], f"text outside a <!-- NAME:begin/end --> block would be lost by `make bench`: {stray[:3]}"


def test_block_names_are_unique() -> None:
    names = re.findall(r"<!-- ([\w-]+):begin -->", DOC.read_text())
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
