"""runs → docs/benchmarks.md: one table per engine and source table, machine facts, the
command that produced it, and the issue-5 targets evaluated on the same run."""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.labels import CLIENT_FLOOR, ENGINE_LABEL, SLOW_METHODS, slow_repeat

MB = 2**20


def _med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _slow_note(args: Any) -> str:
    rounds = slow_repeat(args)
    if rounds >= args.repeat:
        return ""
    return f"; {', '.join(sorted(SLOW_METHODS))}: {rounds} round(s), `--slow-repeat`"


def summarize(records: Sequence[dict[str, Any]], engine: str, table: str,
              method: str) -> dict[str, Any] | None:
    runs = [r for r in records if r["engine"] == engine and r["table"] == table
            and r["method"] == method and r["rep"] >= 0]
    if not runs:
        return None
    ok = [r for r in runs if r["rc"] == 0]
    checks = [r["verified"] for r in runs if "verified" in r]
    mismatch = sorted({c for r in runs for c in r.get("mismatch", [])})
    return {
        "n": len(runs), "ok": len(ok), "walls": [r["wall_s"] for r in ok],
        "wall": _med([r["wall_s"] for r in ok]),
        "rss": _med([r["peak_rss_mb"] for r in ok if r.get("peak_rss_mb") is not None]),
        "stmt": _med([r["max_stmt_s"] for r in ok]), "xact": _med([r["max_xact_s"] for r in ok]),
        "out": _med([r["output_bytes"] for r in ok if "output_bytes" in r]),
        "cpu": _med([r["cpu_s"] for r in ok if r.get("cpu_s") is not None]),
        "server_cpu": _med([r["server_cpu_s"] for r in ok if r.get("server_cpu_s") is not None]),
        "store_cpu": _med([r["store_cpu_s"] for r in ok if r.get("store_cpu_s") is not None]),
        "verified": (all(checks) if checks else None), "mismatch": mismatch,
        "error": next((r.get("error", "") for r in runs if r["rc"] != 0), ""),
    }


def _check_cell(s: dict[str, Any], writes: bool) -> str:
    if s["ok"] < s["n"]:
        first = s["error"].strip().splitlines()[-1:] or [""]
        return f"FAILED ({s['n'] - s['ok']}/{s['n']}): {first[0][:80]}"
    if not writes:
        return "(no output)"
    if s["verified"] is None:
        return "not checked"
    return "ok" if s["verified"] else "✗ " + ", ".join(s["mismatch"])


def targets(records: Sequence[dict[str, Any]], engine: str, table: str, floor: str,
            peers: list[str]) -> list[str]:
    """The issue-5 targets that this run can evaluate, as markdown bullet lines."""
    full = summarize(records, engine, table, "rivet_full")
    if full is None or full["wall"] is None:
        return []
    lines = []
    fl = summarize(records, engine, table, floor)
    if fl and fl["wall"]:
        ratio = full["wall"] / fl["wall"]
        lines.append(f"- full export wall = {ratio:.2f}× the client floor (target ≤ 1.5×): "
                     f"{'met' if ratio <= 1.5 else 'missed'}")
    faster = []
    for name in peers:
        p = summarize(records, engine, table, name)
        if p and p["wall"]:
            faster.append((name, p["wall"] / full["wall"]))
    if faster:
        slowest_gap = min(faster, key=lambda x: x[1])
        verdict = "met" if slowest_gap[1] > 1 else "missed"
        lines.append(f"- faster than every peer: {verdict} (fastest peer: {slowest_gap[0]}, its wall = "
                     f"{slowest_gap[1]:.2f}× rivet's)")
    if full["rss"] is not None:
        lines.append(f"- peak RSS {full['rss']:.0f} MB (target ≤ 400 MB): "
                     f"{'met' if full['rss'] <= 400 else 'missed'}")
    par = summarize(records, engine, table, "rivet_chunked_par2")
    if par and par["wall"]:
        speedup = full["wall"] / par["wall"]
        lines.append(f"- chunked parallel 2 speed-up over full: {speedup:.2f}× (target ≥ 1.3×): "
                     f"{'met' if speedup >= 1.3 else 'missed'}")
        for key, what in (("stmt", "longest statement"), ("xact", "longest transaction")):
            if full[key]:
                frac = par[key] / full[key]
                lines.append(f"- {what}: chunked parallel 2 {par[key]:.2f} s vs full {full[key]:.2f} s "
                             f"= 1/{1 / frac if frac else float('inf'):.1f} (target ≤ 1/8): "
                             f"{'met' if frac <= 1 / 8 else 'missed'}")
    return lines


def _cpu_cell(s: dict[str, Any]) -> str:
    if s["cpu"] is None:
        return "–"
    if s["server_cpu"] is None:
        return f"{s['cpu']:.1f} + –"
    if s.get("store_cpu") is not None:  # an S3 method: the object store's CPU too
        total = s["cpu"] + s["server_cpu"] + s["store_cpu"]
        return f"{s['cpu']:.1f} + {s['server_cpu']:.1f} + S3 server {s['store_cpu']:.1f} = {total:.1f}"
    return f"{s['cpu']:.1f} + {s['server_cpu']:.1f} = {s['cpu'] + s['server_cpu']:.1f}"


def issue16_targets(records: Sequence[dict[str, Any]], engine: str, table: str,
                    floor_name: str) -> list[str]:
    """Issue 16 items 2, 4 and 6 on this table, from the same run (what was measured)."""
    def get(name: str) -> dict[str, Any] | None:
        return summarize(records, engine, table, name)

    full, seq, s3, floor = get("rivet_full"), get("rivet_chunked_seq"), get("rivet_full_s3"), get(floor_name)
    out: list[str] = []
    if full and full["rss"] is not None:
        out.append(f"- peak RSS of the full export {full['rss']:.0f} MB (issue 16 target ≤ 256 MB at 5 M rows): "
                   + ("met" if full["rss"] <= 256 else "missed"))
    if seq and floor and seq["wall"] and floor["wall"]:
        ratio = seq["wall"] / floor["wall"]
        out.append(f"- chunked sequential wall = {ratio:.2f}× the client floor (target ≤ 1.2×): "
                   + ("met" if ratio <= 1.2 else "missed"))
    if seq and full and None not in (seq["cpu"], seq["server_cpu"], full["cpu"], full["server_cpu"]):
        total_full = full["cpu"] + full["server_cpu"]
        extra = (seq["cpu"] + seq["server_cpu"]) - total_full
        out.append(f"- chunking's extra CPU: {extra:+.1f} s client + server = {extra / total_full:+.1%} of the "
                   f"full export's {total_full:.1f} s (target ≤ 10 %): " + ("met" if extra / total_full <= 0.10 else "missed"))
    if s3 and full and s3["wall"] and full["wall"]:
        ratio = s3["wall"] / full["wall"]
        out.append(f"- export to the S3 server = {ratio:.2f}× the local export's wall (target ≤ 1.15×): "
                   + ("met" if ratio <= 1.15 else "missed")
                   + (f"; peak RSS {s3['rss']:.0f} MB" if s3["rss"] is not None else ""))
    return out


def write_report(path: Path, env: dict[str, Any], records: Sequence[dict[str, Any]],
                 methods: Sequence[Any], args: argparse.Namespace, *, catalog: Sequence[Any]) -> None:
    """docs/benchmarks.md from one run's records: `methods` ran, `catalog` is every method
    the runner knows (its order is the tables' row order; a `--baseline` method outside it
    is listed after)."""
    machine = env["machine"]
    lines = [
        "# Export benchmark: rivet vs the usual Python tools",
        "",
        "Generated by `benchmarks/` (see the README's *Benchmark* section); do not edit by hand.",
        "",
        f"Command: `{env['command']}`  ",
        f"Started {env['started']} UTC; {args.repeat} measured round(s) per method (median shown, all "
        f"values in brackets{_slow_note(args)}), {args.warmup} warm-up run(s) of the client floor per table, "
        "every run a fresh process, rotated order.  ",
        f"Machine: {machine['cpus']} CPUs ({machine['cpu_model']}), {machine['mem']} RAM, Linux "
        f"{machine['kernel']}, Python {machine['python']}, pyarrow {machine['pyarrow']}, psycopg "
        f"{machine['psycopg']}, PyMySQL {machine['pymysql']}. Load average at start "
        f"{env['load_start'][0]:.2f}, at end {env['load_end'][0]:.2f}.  ",
    ]
    for engine, info in env["sources"].items():
        lines.append(f"{ENGINE_LABEL[engine]}: {info['version']} (client and server on the same machine, "
                     "loopback TCP).  ")
    if env.get("peer_libs"):
        lines.append("Peers (.venv-bench, benchmarks/requirements.txt): "
                     + ", ".join(f"{k} {v}" for k, v in env["peer_libs"].items()) + ".")
    lines += [
        "",
        "Columns: *wall* = the whole process (start-up and imports included); *rows/s* and "
        "*MB/s* = source rows and source size (PostgreSQL `pg_total_relation_size`, MariaDB "
        "data + index length) over the median wall; *×floor* = wall / the client floor's wall "
        "(`psql \\copy` / `mariadb --quick`); *peak RSS* = max RSS of the client process tree "
        "(GNU time %M; servers excluded); *longest stmt / xact* = the longest single statement "
        "and the longest open transaction of the run's sessions, sampled from pg_stat_activity / "
        "information_schema every 0.1 s; *check* = the output re-read with DuckDB and compared "
        "with the source: row count plus an order-independent checksum per column "
        "(benchmarks/checksum.py), ✗ names the columns that differ. MB = 2^20 bytes. "
        "Output: Parquet zstd level 3 for rivet (its default) and for every peer that lets "
        "the caller choose (benchmarks/peers.py `ZSTD_LEVEL`); dlt uses its own defaults.",
        "",
    ]
    chosen = {m.name for m in methods}
    for engine in env["sources"]:
        for table, facts in env["sources"][engine]["tables"].items():
            floor_name = CLIENT_FLOOR[engine]
            fl = summarize(records, engine, table, floor_name)
            floor_wall = fl["wall"] if fl else None
            lines += [
                f"## {ENGINE_LABEL[engine]} → Parquet: `{table}` ({facts['rows']:,} rows, "
                f"{facts['bytes'] / MB:,.0f} MB)",
                "",
                "| method | what | wall s (runs) | rows/s | MB/s | ×floor | peak RSS MB | CPU s client + server | "
                "longest stmt s | longest xact s | output MB | check |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            extra = [m for m in methods if m.name not in {k.name for k in catalog}]  # --baseline
            for m in [*catalog, *extra]:
                if m.name not in chosen or engine not in m.engines:
                    continue
                s = summarize(records, engine, table, m.name)
                if s is None:
                    continue
                wall = s["wall"]
                walls = "/".join(f"{w:.1f}" for w in s["walls"])
                rows_s = facts["rows"] / wall if wall else None
                mb_s = facts["bytes"] / MB / wall if wall else None
                ratio = wall / floor_wall if wall and floor_wall else None
                out = _fmt(s["out"] / MB, 1) if s["out"] is not None else "–"
                lines.append(
                    f"| {m.name} | {m.label} | **{_fmt(wall)}** ({walls}) | {_fmt(rows_s, 0)} | "
                    f"{_fmt(mb_s, 1)} | {_fmt(ratio)} | {_fmt(s['rss'], 0)} | {_cpu_cell(s)} | {_fmt(s['stmt'])} | "
                    f"{_fmt(s['xact'])} | {out} | {_check_cell(s, m.writes)} |")
            peers = [m.name for m in catalog if m.kind == "peer" and engine in m.engines]
            found = targets(records, engine, table, floor_name, peers) + issue16_targets(
                records, engine, table, floor_name)
            if found:
                lines += ["", "Issue-5 targets on this table (same run):", "", *found]
            lines.append("")
    lines += [
        "Caveats: client and server share the machine's cores, so a method that burns more "
        "client CPU also slows its server; on a shared host compare ratios within one run. "
        "pandas and connectorx hold the whole result in memory by design. The longest "
        "statement/transaction resolution is the sampling interval.",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    # Sections other scenarios write (`<!-- NAME:begin -->` … `<!-- NAME:end -->`, e.g. the
    # upload throughput of benchmarks/cloud_upload.py) are kept.
    old = path.read_text() if path.exists() else ""
    lines += [block + "\n" for block in kept_sections(old)]
    path.write_text("\n".join(lines))


def kept_sections(text: str) -> list[str]:
    """Every `<!-- NAME:begin -->` … `<!-- NAME:end -->` block of `text`, in order."""
    import re

    return [m.group(0) for m in re.finditer(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", text, re.S)]
