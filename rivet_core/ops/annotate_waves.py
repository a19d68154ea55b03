"""`rivet plan --annotate-waves`: write each export's `wave:` and `parallel_safe:` into the
config, as Rivet's flag does (its src/pipeline/plan_cmd.rs); without the flag `plan` never
touches the config.

The schedule is ours, not Rivet's packer (which weighs measured durations and source groups):
an export is `parallel_safe` when its row estimate is under Rivet's cheap-export line (100 000
rows, its `CostClass::Low`); every cheap export shares wave 1, and each other export gets a
wave of its own after them, the largest estimate first (unknown estimates last). Here the
waves are an order — `rivet apply <config.yaml>` runs them one after the other
(ops/apply_waves.py) — so any schedule is safe; this one puts the quick exports first.

The file is edited as text, line by line under each export's `- name:` line, so comments and
layout survive; the edited text is loaded with the real loader and must carry exactly the
planned values before it replaces the file (written whole: a temp file, then a rename).
Otherwise nothing is written and the refusal names the export.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from rivet_core.errors import ConfigError

#: Rivet's cheap-export line (its plan's `CostClass::Low`): fewer rows than this.
CHEAP_ROWS = 100_000
_NAME = re.compile(r"^(\s*)-\s+name:\s*(['\"]?)(.+?)\2\s*(#.*)?$")
_KEY = re.compile(r"^(\s*)(wave|parallel_safe):")

SCOPED_REFUSAL = ("--annotate-waves schedules the WHOLE config (each export's wave is relative to the others) and "
                  "cannot be scoped to --export: packing one export alone would rewrite its wave to 1. Drop "
                  "--export to annotate the whole config, or drop --annotate-waves to plan just this export.")


def schedule(plan_exports: list[dict[str, Any]]) -> dict[str, tuple[int, bool]]:
    """Export name → (wave, parallel_safe) from the plan's row estimates (module docstring)."""
    cheap = [e["export_name"] for e in plan_exports
             if e.get("row_estimate") is not None and e["row_estimate"] < CHEAP_ROWS]
    heavy = sorted((e for e in plan_exports if e["export_name"] not in cheap),
                   key=lambda e: (e.get("row_estimate") is None, -(e.get("row_estimate") or 0)))
    out = {name: (1, True) for name in cheap}
    first = 2 if cheap else 1
    out.update({e["export_name"]: (first + i, False) for i, e in enumerate(heavy)})
    return out


def _item_end(lines: list[str], start: int, dash: int) -> int:
    """The line after the export item that starts at `start` (its `-` at column `dash`)."""
    for i in range(start + 1, len(lines)):
        text = lines[i]
        if text.strip() and not text.lstrip().startswith("#") and len(text) - len(text.lstrip()) <= dash:
            return i
    return len(lines)


def annotate_text(text: str, fields: dict[str, tuple[int, bool]]) -> tuple[str, set[str]]:
    """`text` with each named export's `wave:`/`parallel_safe:` set, and the names written."""
    lines = text.splitlines(keepends=True)
    written: set[str] = set()
    i = 0
    while i < len(lines):
        found = _NAME.match(lines[i].rstrip("\n"))
        if found is None or found.group(3) not in fields:
            i += 1
            continue
        name, dash = found.group(3), len(found.group(1))
        indent = " " * (dash + 2)
        wave, safe = fields[name]
        end = _item_end(lines, i, dash)
        body = [ln for ln in lines[i + 1:end]
                if not ((m := _KEY.match(ln)) and len(m.group(1)) == dash + 2)]
        new = [f"{indent}wave: {wave}\n", f"{indent}parallel_safe: {'true' if safe else 'false'}\n"]
        lines[i + 1:end] = new + body
        written.add(name)
        i += 1 + len(new) + len(body)
    return "".join(lines), written


def annotate_config(path: Path, fields: dict[str, tuple[int, bool]], params: dict[str, str]) -> set[str]:
    """Write `fields` into the config at `path` (module docstring); the names written."""
    from rivet_core.config import load_config

    text, written = annotate_text(path.read_text(encoding="utf-8"), fields)
    if not written:
        return written
    probe = path.with_name(f".{path.name}.annotate.yaml")
    probe.write_text(text, encoding="utf-8")
    try:
        loaded = {e.name: (e.wave, e.parallel_safe) for e in load_config(str(probe), params).exports}
    finally:
        probe.unlink(missing_ok=True)
    wrong = sorted(n for n in written if loaded.get(n) != fields[n])
    if wrong:
        raise ConfigError(f"plan --annotate-waves: the edited config would not carry the planned wave/parallel_safe "
                          f"for export(s) {', '.join(wrong)} (an unusual layout under their `- name:` line) — "
                          f"nothing was written to {path}; set `wave:` and `parallel_safe:` by hand")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return written


__all__ = ["CHEAP_ROWS", "SCOPED_REFUSAL", "annotate_config", "annotate_text", "schedule"]
