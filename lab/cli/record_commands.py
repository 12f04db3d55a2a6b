"""Commands that read run records: `lab runs` (and its bound), `lab show`, `lab explain`."""

from __future__ import annotations

import json
import shlex

import click
from rich.markup import escape
from rich.table import Table

from lab.cli.console import console, exit_codes_text
from lab.cli.options import json_option


@click.command("runs")
@click.option("--prune", is_flag=True,
              help="Remove the oldest runs beyond a bound: the --max-* given here, else the configured one.")
@click.option("--max-count", metavar="N", help="With --prune: keep at most N runs.")
@click.option("--max-age", metavar="AGE", help="With --prune: remove runs older than AGE (30d, 12h, 90m, 2w).")
@click.option("--max-size", metavar="SIZE", help="With --prune: keep at most SIZE of records in all (500M, 2G).")
@click.option("--dry-run", is_flag=True, help="With --prune: list what would go, remove nothing.")
@click.option("--keep", "keep_run", metavar="RUN", help="Pin RUN: no bound and no prune ever removes it.")
@click.option("--unkeep", "unkeep_run", metavar="RUN", help="Unpin RUN (the bound applies to it again).")
@json_option
def runs_command(prune, max_count, max_age, max_size, dry_run, keep_run, unkeep_run, as_json):
    """List recorded runs (newest last) with each one's size; prune them; pin one.

    Records are held to a bound after every run: the oldest go first until at most 500 runs and 1 GiB are left
    (change it with LAB_RUNS_MAX_COUNT, LAB_RUNS_MAX_SIZE, LAB_RUNS_MAX_AGE; `off` lifts one). A run in
    progress and a run pinned with --keep are never removed. See docs/how-to/records.md.

    \b
    Examples:
      lab runs                                  every run, its size, and the bound
      lab runs --prune --max-count 20 --dry-run  which runs would go to leave 20
      lab runs --prune --max-age 7d             remove runs older than a week
      lab runs --keep exercise03                pin the newest run of exercise03
    """
    from lab.errors import SpecError

    limits = {"--max-count": max_count, "--max-age": max_age, "--max-size": max_size, "--dry-run": dry_run or None}
    given = [option for option, value in limits.items() if value is not None]
    if given and not prune:
        raise SpecError(f"{', '.join(given)} only go with --prune", f"add --prune: lab runs --prune {' '.join(given)} ...")
    if keep_run or unkeep_run:
        if prune or (keep_run and unkeep_run):
            raise SpecError("--keep, --unkeep and --prune go one at a time", "run `lab runs` once for each")
        _pin(keep_run or unkeep_run, keep=bool(keep_run), as_json=as_json)
        return
    if prune:
        _prune(max_count, max_age, max_size, dry_run, as_json)
        return
    _list_runs(as_json)


def _list_runs(as_json: bool) -> None:
    from lab.analysis import retention
    from lab.analysis.record import list_runs

    bound = retention.configured_bound()
    runs = list_runs()
    stored = {run.run_id: run for run in retention.stored_runs()}
    if as_json:
        print(json.dumps([{**record.to_dict(), "size_bytes": stored[record.run_id].size if record.run_id in stored else None,
                           "kept": record.run_id in stored and stored[record.run_id].kept} for record in runs], indent=2))
        return
    if not runs:
        console.print("no runs recorded yet (try `lab run exercise01`)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("run", "exercise", "lab", "status", "seconds", "checks", "size"):
        table.add_column(column)
    for record in runs:
        passed = sum(1 for check in record.checks if check.passed)
        found = stored.get(record.run_id)
        size = retention.human_size(found.size) if found else "?"
        table.add_row(record.run_id, record.exercise or "?", record.lab or "?", record.status, f"{record.seconds:.1f}",
                      f"{passed}/{len(record.checks)}", size + (" (kept)" if found and found.kept else ""))
    console.print(table)
    total = sum(run.size for run in stored.values())
    console.print(f"{len(stored)} run(s), {retention.human_size(total)}; bound: {bound.describe()} "
                  "(LAB_RUNS_MAX_COUNT/_SIZE/_AGE; `lab runs --prune --dry-run` shows what it removes)", markup=False)


def _prune(max_count, max_age, max_size, dry_run: bool, as_json: bool) -> None:
    from lab.analysis import retention

    if max_count is None and max_age is None and max_size is None:
        bound = retention.configured_bound()
    else:
        bound = retention.Bound(
            retention.parse_count(max_count, "--max-count") if max_count is not None else None,
            retention.parse_size(max_size, "--max-size") if max_size is not None else None,
            retention.parse_age(max_age, "--max-age") if max_age is not None else None)
    chosen = retention.prune(bound, dry_run=dry_run)
    if as_json:
        print(json.dumps({"dry_run": dry_run, "bound": bound.describe(),
                          "removed": [{"run": run.run_id, "size_bytes": run.size} for run in chosen]}, indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    freed = retention.human_size(sum(run.size for run in chosen))
    console.print(f"{verb} {len(chosen)} run(s), {freed} (bound: {bound.describe()})", markup=False)
    for run in chosen:
        console.print(f"  {run.run_id}  {retention.human_size(run.size)}", markup=False)


def _pin(run: str, keep: bool, as_json: bool) -> None:
    from lab.analysis import retention
    from lab.analysis.record import load

    record = load(run)
    was = retention.set_kept(record.path, keep)
    if as_json:
        print(json.dumps({"run": record.run_id, "kept": keep}))
    elif keep:
        console.print(f"{record.run_id} {'was already' if was else 'is now'} kept: no bound or prune removes it "
                      "(`lab runs --unkeep` undoes it)", markup=False)
    else:
        console.print(f"{record.run_id} {'is no longer kept' if was else 'was not kept'}: the bound applies to it",
                      markup=False)


@click.command("show")
@click.argument("run", default="latest")
@json_option
def show_command(run, as_json):
    """Print one recorded RUN (id, id prefix, exercise name, or 'latest')."""
    from lab.analysis.record import load

    record = load(run)
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
        return
    console.print(f"[bold]{escape(record.run_id)}[/]: {escape(record.exercise)} on lab '{escape(record.lab)}', "
                  f"{record.status} in {record.seconds:.1f} s")
    for step in record.steps:
        codes = exit_codes_text(step.exit_codes)
        expect = f" (expect {step.expect})" if step.expect else ""
        extra = " (timed out)" if step.timed_out else ""
        console.print(f"  step {step.name}{expect}: {codes}{extra}, {step.seconds:g} s", markup=False)
        if step.command:
            console.print(f"    command: {shlex.join(step.command)}", markup=False)
        if step.problem:
            console.print(f"    {step.problem}", markup=False)
        if step.oom_killed:
            console.print(f"    OOM-killed on node(s) {', '.join(map(str, step.oom_killed))}")
    if record.error:
        console.print(f"  error: {record.error}", markup=False)
    table = Table(box=None, pad_edge=False)
    for column in ("result", "check", "detail"):
        table.add_column(column)
    for check in record.checks:
        table.add_row("[green]PASS[/]" if check.passed else "[red]FAIL[/]", escape(check.name), escape(check.detail))
    console.print(table)
    if record.diagnosis:
        console.print(f"why: {record.diagnosis[0].get('title')} (all findings: `lab explain {record.run_id}`)",
                      markup=False)
    console.print(f"record: {record.path}" + (f"; curves: {record.curves}" if record.curves else ""), markup=False)
    _print_timeline(record)


def _print_timeline(record) -> None:
    """Draw the run's timeline.png now, on the first look (runs do not spend the time), and say where it is."""
    from lab.analysis.timeline import draw_timeline, timeline_path

    drawn = timeline_path(record) if timeline_path(record).is_file() else draw_timeline(record)
    if drawn:
        console.print(f"timeline: {drawn}", markup=False)


@click.command("explain")
@click.argument("run", default="latest")
@json_option
def explain_command(run, as_json):
    """Say why RUN failed (id, id prefix, exercise name, or 'latest'): every finding, most likely cause first.

    Each finding names the cause, quotes its evidence with the node and rank, and gives the fix. Then one
    line per rank: how it ended (or where it waited when the lab stopped the run), the last collective it
    reached (torch's Flight Recorder) and the last thing it printed, so a rank ahead or behind stands out.
    The ranks' stacks of a hung run are in the record's stacks/ folder (summary.txt). Last, what every node
    answered when the lab asked it right after the run: the paths, commands and variables the errors named.

    \b
    Examples:
      lab explain                 the latest run
      lab explain exercise03      the newest run of exercise03
      lab explain --json          findings as JSON: cause, title, evidence, node, rank, fix
    """
    from lab.analysis.diagnosis import Finding, NodeProbes, format_findings
    from lab.analysis.diagnosis.nodes import format_probes
    from lab.analysis.ranks import format_ranks
    from lab.analysis.record import load

    record = load(run)
    if as_json:
        print(json.dumps(record.diagnosis, indent=2))
        return
    if record.passed:
        console.print(f"{record.run_id} passed: nothing to explain", markup=False)
        return
    if not record.diagnosis:
        console.print(f"{record.run_id} {record.status}: no diagnosis was recorded"
                      + (f" ({record.error})" if record.error else ""), markup=False)
        return
    console.print(format_findings([Finding.from_dict(finding) for finding in record.diagnosis], verbose=True),
                  markup=False, highlight=False)
    ranks = format_ranks(record)
    if ranks:
        console.print(ranks, markup=False, highlight=False)
    for step in record.steps:
        answers = format_probes(probes) if (probes := NodeProbes.from_dict(step.probes)) else ""
        if answers:
            console.print(answers, markup=False, highlight=False)
    summary = record.stacks_dir / "summary.txt"
    if summary.is_file():
        console.print(f"stacks of every process: {summary}", markup=False)
    _print_timeline(record)
