"""Rivet's path matrix (its `dev/path_matrix`): seven configs, each run once with `rivet run`
in a directory of its own; what lands on disk (every entry under that directory but the
config, run ids and timestamps normalised as Rivet's harness does) and the accounting line of
each run's `summary.json` are compared with Rivet's expected `.layout` and `.summary`. The
configs and expected values are Rivet's, as facts; each export adds `layout: rivet`, the
opt-in that writes Rivet's flat names (our default puts parts under `data/`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

_RUNID = re.compile(r"[0-9]{8}T[0-9]{6}\.[0-9]+")
_TS = re.compile(r"[0-9]{8}_[0-9]{6}(?:_[0-9]{3})?")
_NONCE = re.compile(r"(_chunk[0-9]+)_[0-9a-f]{16}\b")
_RUNS = [".rivet", ".rivet/runs", ".rivet/runs/{e}_<RUNID>", ".rivet/runs/{e}_<RUNID>/summary.json",
         ".rivet/runs/{e}_<RUNID>/summary.md"]


def _published(prefix: str, export: str, *files: str) -> list[str]:
    parts = prefix.split("/")
    dirs = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return [*dirs, f"{prefix}/_SUCCESS", f"{prefix}/manifest-{export}_<RUNID>.json", f"{prefix}/manifest.json",
            *(f"{prefix}/{f}" for f in files)]


def _runs(*exports: str) -> list[str]:
    seen: list[str] = []
    for e in exports:
        seen += [r.format(e=e) for r in _RUNS if r.format(e=e) not in seen]
    return seen


def _full(sid: str, query: str = "SELECT id, name FROM pa_audit", fmt: str = "parquet",
          path: str | None = None) -> dict[str, object]:
    return {"name": "pa_audit", "query": query, "mode": "full", "format": fmt,
            "destination": {"type": "local", "path": path or f"./out/{sid}"}, "layout": "rivet"}


def _line(export: str, fmt: str, rows: int, files: int) -> str:
    return (f"export={export}\tstatus=success\tformat={fmt}\tcompression=zstd\ttotal_rows={rows}\t"
            f"files_produced={files}")


#: id → (exports, Rivet's expected layout, Rivet's expected summary lines).
CASES: dict[str, tuple[list[dict[str, object]], list[str], list[str]]] = {
    "p01_full_parquet_local": ([_full("p01")],
                               [*_runs("pa_audit"), ".rivet_state.db",
                                *_published("out/p01", "pa_audit", "pa_audit_<TS>.parquet")],
                               [_line("pa_audit", "parquet", 30, 1)]),
    "p02_full_csv_local": ([_full("p02", fmt="csv")],
                           [*_runs("pa_audit"), ".rivet_state.db",
                            *_published("out/p02", "pa_audit", "pa_audit_<TS>.csv")],
                           [_line("pa_audit", "csv", 30, 1)]),
    "p03_chunked_multifile": ([{"name": "pa_audit", "table": "pa_audit", "mode": "chunked", "chunk_column": "id",
                                "chunk_size": 10, "format": "parquet",
                                "destination": {"type": "local", "path": "./out/p03"}, "layout": "rivet"}],
                              [*_runs("pa_audit"), ".rivet_state.db",
                               *_published("out/p03", "pa_audit", *(f"pa_audit_<TS>_chunk{i}.parquet"
                                                                    for i in range(3)))],
                              [_line("pa_audit", "parquet", 30, 3)]),
    "p04_multi_export": ([{**_full("p04_a", "SELECT id, name FROM pa_audit WHERE id <= 15"), "name": "pa_audit_a"},
                          {**_full("p04_b", "SELECT id, name FROM pa_audit WHERE id > 15"), "name": "pa_audit_b"}],
                         [*_runs("pa_audit_a", "pa_audit_b"), ".rivet_state.db",
                          *_published("out/p04_a", "pa_audit_a", "pa_audit_a_<TS>.parquet"),
                          *[p for p in _published("out/p04_b", "pa_audit_b", "pa_audit_b_<TS>.parquet")
                            if p != "out"]],
                         [_line("pa_audit_a", "parquet", 15, 1), _line("pa_audit_b", "parquet", 15, 1)]),
    "p05_stdout": ([{**_full("p05", "SELECT id, name FROM pa_audit WHERE id <= 5", "csv"),
                     "destination": {"type": "stdout"}}],
                   [*_runs("pa_audit"), ".rivet_state.db"],
                   [_line("pa_audit", "csv", 5, 1)]),
    "p06_subdir_path": ([_full("p06", path="./out/p06/nested/run")],
                        [*_runs("pa_audit"), ".rivet_state.db",
                         *_published("out/p06/nested/run", "pa_audit", "pa_audit_<TS>.parquet")],
                        [_line("pa_audit", "parquet", 30, 1)]),
    "p07_run_summary_landing": ([_full("p07", "SELECT id, name FROM pa_audit WHERE id <= 5")],
                                [*_runs("pa_audit"), ".rivet_state.db",
                                 *_published("out/p07", "pa_audit", "pa_audit_<TS>.parquet")],
                                [_line("pa_audit", "parquet", 5, 1)]),
}


def normalise(entries: list[str]) -> list[str]:
    """Rivet's harness: run ids → <RUNID>, timestamps → <TS>, chunk nonces dropped; sorted."""
    return sorted({_NONCE.sub(r"\1", _TS.sub("<TS>", _RUNID.sub("<RUNID>", e))) for e in entries})


def layout(work: Path) -> list[str]:
    entries = []
    for dirpath, dirnames, filenames in os.walk(work):
        for name in [*dirnames, *filenames]:
            if name != "rivet.yaml":
                entries.append((Path(dirpath) / name).relative_to(work).as_posix())
    return normalise(entries)


def summaries(work: Path) -> list[str]:
    keys = ("export_name", "status", "format", "compression", "total_rows", "files_produced")
    labels = ("export", "status", "format", "compression", "total_rows", "files_produced")
    lines = []
    for f in sorted((work / ".rivet" / "runs").rglob("summary.json")):
        doc = json.loads(f.read_text())
        lines.append("\t".join(f"{lab}={'null' if doc.get(k) is None else doc.get(k)}"
                               for lab, k in zip(labels, keys, strict=True)))
    return sorted(lines)


def run_case(work: Path, case: str, pg_url: str) -> subprocess.CompletedProcess[str]:
    exports, _, _ = CASES[case]
    work.mkdir(parents=True, exist_ok=True)
    (work / "rivet.yaml").write_text(yaml.safe_dump({"source": {"type": "postgres", "url_env": "PG_URL"},
                                                     "exports": exports}, sort_keys=False))
    env = {**os.environ, "PG_URL": pg_url}
    env.pop("RIVET_STATE_URL", None)
    return subprocess.run([sys.executable, "-m", "rivet_core.cli", "run", "-c", "rivet.yaml"], capture_output=True,
                          text=True, env=env, cwd=work, timeout=300)
