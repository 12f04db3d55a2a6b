"""Commands that read run records: `lab runs`, `lab show`."""

from __future__ import annotations

import json

import click
from rich.markup import escape
from rich.table import Table

from lab.cli.console import console
from lab.cli.options import json_option


@click.command("runs")
@json_option
def runs_command(as_json):
    """List recorded runs (newest last)."""
    from lab.jobs.records import list_runs

    runs = list_runs()
    if as_json:
        print(json.dumps(runs, indent=2))
        return
    if not runs:
        console.print("no runs recorded yet (try `lab run exercise01`)")
        return
    table = Table(box=None, pad_edge=False)
    for column in ("run", "exercise", "lab", "status", "seconds", "checks"):
        table.add_column(column)
    for record in runs:
        checks = record.get("checks", [])
        passed = sum(1 for check in checks if check.get("passed"))
        table.add_row(record["run_id"], record.get("exercise", "?"), record.get("lab", "?"), record.get("status", "?"),
                      f"{record.get('seconds', 0):.1f}", f"{passed}/{len(checks)}")
    console.print(table)


@click.command("show")
@click.argument("run", default="latest")
@json_option
def show_command(run, as_json):
    """Print one recorded RUN (id, id prefix, exercise name, or 'latest')."""
    from lab.jobs.records import load_run

    record = load_run(run)
    if as_json:
        print(json.dumps(record, indent=2))
        return
    console.print(f"[bold]{record['run_id']}[/]: {record.get('exercise')} on lab '{record.get('lab')}', "
                  f"{record.get('status')} in {record.get('seconds', 0):.1f} s")
    for step in record.get("steps", []):
        codes = ", ".join(f"node{node}={code}" for node, code in step.get("exit_codes", {}).items())
        extra = " (timed out)" if step.get("timed_out") else ""
        console.print(f"  step {step['step']} (expect {step.get('expect')}): {codes}{extra}, {step.get('seconds')} s")
        if step.get("problem"):
            console.print(f"    {step['problem']}", markup=False)
        if step.get("oom_killed"):
            console.print(f"    OOM-killed on node(s) {', '.join(map(str, step['oom_killed']))}")
    if record.get("error"):
        console.print(f"  error: {record['error']}", markup=False)
    table = Table(box=None, pad_edge=False)
    for column in ("result", "check", "detail"):
        table.add_column(column)
    for check in record.get("checks", []):
        table.add_row("[green]PASS[/]" if check["passed"] else "[red]FAIL[/]", escape(check["name"]),
                      escape(check.get("detail") or ""))
    console.print(table)
    console.print(f"record: {record.get('path')}" + (f"; curves: {record['curves']}" if record.get("curves") else ""))

