"""`rivet plan` (write a reviewable JSON plan) and `rivet apply` (run it if still fresh).

`apply` refuses a stale plan (see rivet_core/ops/plan.py for the rules) with one line per reason and
the fix; `--force` runs it anyway, printing the reasons as warnings. The run itself is the
`rivet run` command invoked for exactly the planned exports, so progress, locks, the
commit sequence, summaries and exit codes are the ones `run` has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from rivet_core.cli.run import run
from rivet_core.cli.shared import config_option, guard, load
from rivet_core.errors import ConfigError


@click.command("plan")
@config_option
@click.option("-e", "--export", "export_names", multiple=True, help="Export(s) to plan (default: all).")
@click.option("-p", "--param", "params", multiple=True, metavar="K=V", help="Value for ${K} in the config.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the JSON plan here (default: print it on stdout).")
@click.option("--format", "fmt", type=click.Choice(["json", "pretty"]), default="json", show_default=True,
              help="On stdout: the JSON plan, or one line per export (Rivet's flag; with -o the file is JSON).")
@click.option("--annotate-waves", "annotate_waves", is_flag=True,
              help="Write each export's wave: and parallel_safe: into the config (Rivet's flag; without it plan "
                   "never touches the config).")
@guard
def plan(config_path: str, export_names: tuple[str, ...], params: tuple[str, ...],
         output: str | None, fmt: str = "json", annotate_waves: bool = False) -> int:
    """Plan exports without writing data: strategy, windows, cursor, estimate, diagnostics."""
    from rivet_core.ops.plan import build_plan, write_plan

    if annotate_waves and export_names:
        from rivet_core.ops.annotate_waves import SCOPED_REFUSAL

        raise ConfigError(SCOPED_REFUSAL)
    config = load(config_path, params)
    doc = build_plan(config, list(export_names) or None)
    if annotate_waves:
        _annotate(config, doc, params)
    if output is None and fmt == "json":
        click.echo(json.dumps(doc, indent=2))
        return 0
    if output is not None:
        write_plan(doc, Path(output))
    for e in doc["exports"]:
        windows = len(e.get("windows") or [])
        est = "unknown" if e["row_estimate"] is None else f"~{e['row_estimate']:,}"
        click.echo(f"{e['export_name']:30} {e['strategy']}; rows {est}; windows {windows}; "
                   f"verdict {e['diagnostics']['verdict']}", err=output is not None)
    if output is not None:
        click.echo(f"wrote {output}; review it, then: rivet apply {output}", err=True)
    return 0


@click.command("apply")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Run a stale plan anyway (the reasons are printed).")
@click.option("--max-age", default="24h", show_default=True,
              help="Refuse plans older than this (e.g. 0, 90s, 30m, 24h, 2d).")
@click.option("-p", "--param", "params", multiple=True, metavar="K=V",
              help="The same -p values the plan was made with.")
@click.option("--validate", is_flag=True, help="Verify each destination after its run.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document with every run summary.")
@click.option("--resume", is_flag=True,
              help="With a config: skip exports whose destination holds _SUCCESS, resume the others (Rivet's flag).")
@click.option("--pool", type=click.IntRange(min=1), metavar="N",
              help="Rivet's pool of N concurrent exports: refused (exports run one at a time here).")
@click.option("--split", is_flag=True, help="With --pool (Rivet's flag): refused with --pool.")
@guard
def apply(plan_file: str, force: bool, max_age: str, params: tuple[str, ...], validate: bool,
          as_json: bool, resume: bool = False, pool: int | None = None, split: bool = False) -> int:
    """Run a plan made by `rivet plan`, refusing it when stale (age, config, cursor, windows);
    or, given a YAML config, run its exports wave by wave (Rivet's `apply <config.yaml>`)."""
    from rivet_core.ops.apply_waves import POOL_REFUSAL, is_config_file
    from rivet_core.ops.plan import parse_duration, read_plan, staleness

    if split and pool is None:
        raise click.UsageError("the argument '--split' requires '--pool <N>'")
    if is_config_file(plan_file):
        if pool is not None:
            raise ConfigError(POOL_REFUSAL)
        return _apply_config_waves(plan_file, force, resume, params, validate, as_json)
    if pool is not None:  # Rivet's refusal, for a plan artifact
        raise ConfigError("--pool schedules a whole CONFIG's exports (it needs the full set to order by duration) "
                          "and does not apply to a sealed single-export plan artifact. Pass the YAML config instead: "
                          "`rivet apply <config.yaml> --pool N`.")
    if resume:
        click.echo("warning: --resume applies only to wave-ordered config execution; ignored for a sealed plan "
                   "artifact", err=True)
    rivets = _rivet_artifact(Path(plan_file))
    if rivets is not None:
        return _apply_rivet_plan(rivets, Path(plan_file), force, params, validate, as_json)
    doc = read_plan(Path(plan_file))
    config = load(doc["config_path"], params)
    problems = staleness(doc, config, max_age=parse_duration(max_age))
    if problems and not force:
        reasons = "; ".join(p.reason for p in problems)
        raise ConfigError(f"plan {plan_file} is stale: {reasons} — re-run `rivet plan` and review it, "
                          "or pass --force to apply it anyway")
    for p in problems:
        click.echo(f"warning: applying a stale plan (--force): {p.reason}", err=True)
    names = tuple(e["export_name"] for e in doc["exports"])
    click.echo(f"applying plan {doc.get('plan_id', '?')}: {', '.join(names)}", err=True)
    ctx = click.get_current_context()
    return ctx.invoke(run, config_path=doc["config_path"], export_names=names,
                      validate=validate, params=params, as_json=as_json)


def _apply_config_waves(config_path: str, force: bool, resume: bool, params: tuple[str, ...], validate: bool,
                        as_json: bool) -> int:
    """`rivet apply <config.yaml>`: each wave through `rivet run` (rivet_core/ops/apply_waves.py)."""
    from rivet_core.cli.shared import worst_exit
    from rivet_core.ops.apply_waves import is_complete, waves

    config = load(config_path, params)
    scheduled = waves(list(config.exports))
    total = sum(len(exports) for _, exports in scheduled)
    codes: list[int] = []
    ctx = click.get_current_context()
    for label, exports in scheduled:
        pending = []
        for export in exports:
            if resume and is_complete(config, export):
                click.echo(f"apply: skipping '{export.name}' — destination already complete (_SUCCESS)", err=True)
            else:
                pending.append(export.name)
        if not pending:
            continue
        if total > 1:
            click.echo(f"\n  ── wave {label} · {len(pending)} export(s) ──", err=True)
        try:
            ctx.invoke(run, config_path=config_path, export_names=tuple(pending), validate=validate, resume=resume,
                       force=force, params=params, as_json=as_json)
        except SystemExit as done:  # `run` ends the process with its exit code; the next wave still runs
            codes.append(done.code if isinstance(done.code, int) else 1)
    return worst_exit(codes)


def _annotate(config: Any, doc: dict, params: tuple[str, ...]) -> None:
    """`--annotate-waves`: the schedule written into the config (rivet_core/ops/annotate_waves.py)."""
    from rivet_core.cli.shared import parse_params
    from rivet_core.ops.annotate_waves import annotate_config, schedule

    fields = schedule(doc["exports"])
    written = annotate_config(Path(config.config_path), fields, parse_params(params))
    click.echo(f"plan --annotate-waves: (over)wrote wave/parallel_safe on {len(written)} export(s) in "
               f"{config.config_path}", err=True)
    missing = sorted(set(fields) - written)
    if missing:
        click.echo(f"warning: plan: {len(missing)} export(s) had recommendations but NO matching `- name:` line in "
                   f"{config.config_path} — nothing was written for them: {missing}", err=True)


def _rivet_artifact(path: Path) -> dict | None:
    """The plan file's document when Rivet wrote it (rivet_core/ops/rivet_plan.py), else None
    (ours, or not a plan: read_plan says which)."""
    from rivet_core.ops.rivet_plan import is_rivet_artifact

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if is_rivet_artifact(doc) else None


def _apply_rivet_plan(doc: dict, plan_file: Path, force: bool, params: tuple[str, ...], validate: bool,
                      as_json: bool) -> int:
    """Rivet's apply rules on Rivet's artifact, then `rivet run` of its one export."""
    from rivet_core.ops import rivet_plan

    config_path = rivet_plan.config_for(doc, plan_file)
    config = load(str(config_path), params)
    from rivet_core.state import StateStore

    store = StateStore.open(config.config_path)
    try:
        cursor = store.get_cursor(doc["export_name"])
    finally:
        store.close()
    reasons = rivet_plan.problems(doc, cursor)
    if reasons and not force:
        raise ConfigError("; ".join(reasons) + ". Regenerate with `rivet plan` or pass --force to override.")
    for reason in reasons:
        click.echo(f"warning: {reason} — applying anyway (--force)", err=True)
    click.echo(f"applying Rivet plan {doc.get('plan_id', '?')} ({doc.get('rivet_version', '?')}): "
               f"{doc['export_name']} with {config_path}", err=True)
    return click.get_current_context().invoke(run, config_path=str(config_path),
                                              export_names=(doc["export_name"],), validate=validate,
                                              params=params, as_json=as_json)
