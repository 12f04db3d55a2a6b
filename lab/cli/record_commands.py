"""Commands that read run records: `lab runs`, `lab show`, `lab explain`."""

from __future__ import annotations

import json
import shlex

import click
from rich.markup import escape
from rich.table import Table

from lab.cli.console import console, exit_codes_text
from lab.cli.options import json_option


@click.command("runs")
@json_option
def runs_command(as_json):
    """List recorded runs (newest last)."""
    from lab.analysis.record import list_runs

    runs = list_runs()
    if as_json:
        print(json.dumps([record.to_dict() for record in runs], indent=2))
        return
    if not runs:
        console.print("no runs recorded yet (try `lab run exercise01`)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("run", "exercise", "lab", "status", "seconds", "checks"):
        table.add_column(column)
    for record in runs:
        passed = sum(1 for check in record.checks if check.passed)
        table.add_row(record.run_id, record.exercise or "?", record.lab or "?", record.status, f"{record.seconds:.1f}",
                      f"{passed}/{len(record.checks)}")
    console.print(table)


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
