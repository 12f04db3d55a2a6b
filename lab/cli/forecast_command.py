"""`lab forecast`: how a profiled run scales. lab/forecast/ is the model; this parses, prints and draws."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from lab.cli.console import console
from lab.cli.options import json_option
from lab.errors import SpecError

DEFAULT_NODES = "4,8,16,32"


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 1:
        raise SpecError(f"--nodes '{text}' is not a list of node counts", "e.g. --nodes 4,8,16,32")
    return sizes


@click.command("forecast")
@click.argument("run", default="latest")
@click.option("--nodes", "sizes", default=DEFAULT_NODES, show_default=True, metavar="N,N,...",
              help="Node counts to forecast.")
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, metavar="K",
              help="Processes per node on the target (default: the rehearsal's).")
@click.option("--link", default=None, metavar="PROFILE",
              help="The target's link, as `lab up --link` takes it: ethernet-10g, 1gbit, 25gbit:5us, ... "
                   "(default: the rehearsal's).")
@click.option("--compute-ms", type=click.FloatRange(min=0, min_open=True), default=None, metavar="MS",
              help="Computation per step on the target (e.g. a GPU step you measured): a what-if, not validated.")
@click.option("--compute-scale", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              metavar="F", help="Multiply the rehearsal's computation per step by F (0.1: a 10x faster device).")
@click.option("--price", type=click.FloatRange(min=0), default=None, metavar="PER-NODE-HOUR",
              help="Price of one node for an hour: the table gets the cost of --steps steps.")
@click.option("--steps", type=click.IntRange(min=1), default=None, metavar="N",
              help="Steps of the whole job: the table gets its time (and cost, with --price).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Where the PNG goes (default: forecast.png in the run's record, shown by `lab report`).")
@json_option
def forecast_command(run, sizes, nproc_per_node, link, compute_ms, compute_scale, price, steps, output, as_json):
    """How RUN (a `--profile`d rehearsal; default: the latest run) will scale: step time, exposed
    communication and its share, scaling efficiency, time and cost, per node count.

    \b
    Rehearse on 2 nodes, then forecast:
      lab up --nodes 2 --link 1gbit --cpus 1
      lab torchrun --profile train.py
      lab forecast --nodes 4,8,16,32
      lab forecast --nodes 8 --link ethernet-10g --steps 100000 --price 3.5
      lab forecast --nodes 8 --link 100gbit --compute-ms 120     (a GPU step: a what-if)

    The model (ring all_reduce cost, fitted on the rehearsal's calibration and its own
    collectives; DDP's overlap replayed from the rehearsal's issue times) and what it leaves
    out are printed under the table; docs/how-to/forecast.md has the validation.
    """
    from lab.analysis.record import load
    from lab.analysis.report import FORECAST_PICTURE
    from lab.forecast.forecast import TargetCluster, forecast
    from lab.forecast.plot import draw_forecast
    from lab.forecast.rehearsal import PROFILE_FOLDER, load_rehearsal
    from lab.model.spec import parse_link

    nodes = parse_sizes(sizes)
    if link is not None:
        parse_link(link)  # a bad profile is a one-line error before anything is read
    record = load(run)
    rehearsal = load_rehearsal(record.path / PROFILE_FOLDER, record.run_id)
    result = forecast(rehearsal, TargetCluster(nodes, nproc_per_node, link, compute_ms, compute_scale, price, steps))
    title = f"{' '.join(rehearsal.command) or record.run_id}: forecast from {rehearsal.nodes} node(s)" + (
        f", link {link}" if link else "")
    picture = draw_forecast(result, output or record.path / FORECAST_PICTURE, title)
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    print_forecast(result, record.run_id, picture)


def print_forecast(result, run_id: str, picture: Path) -> None:
    label = " — WHAT-IF (--compute-ms): not validated" if result.what_if else ""
    console.print(f"[bold]forecast of {escape(run_id)}[/]{label}")
    table = Table(box=None, pad_edge=False)
    columns = ["nodes", "ranks", "step (ms)", "compute (ms)", "comm exposed (ms)", "comm share", "efficiency"]
    with_time = any(row.run_hours is not None for row in result.rows)
    with_cost = any(row.cost is not None for row in result.rows)
    columns += ["time (h)"] * with_time + ["cost"] * with_cost
    for column in columns:
        table.add_column(column, justify="right")
    for row, rehearsal in [(result.rehearsal_row, True)] + [(row, False) for row in result.rows]:
        cells = [f"{row.nodes}" + (" (rehearsal size)" if rehearsal else ""), str(row.ranks), f"{row.step_ms:.1f}",
                 f"{row.compute_ms:.1f}", f"{row.comm_exposed_ms:.1f}", f"{row.comm_share:.0%}",
                 f"{row.efficiency:.2f}"]
        cells += [f"{row.run_hours:.2f}" if row.run_hours is not None else "-"] * with_time
        cells += [f"{row.cost:.2f}" if row.cost is not None else "-"] * with_cost
        table.add_row(*cells)
    console.print(table)
    console.print("assumptions:")
    for line in result.assumptions:
        console.print(f"  - {escape(line)}")
    if result.levers:  # the largest size where communication dominates (--json has them for every such size)
        nodes, levers = max(result.levers.items())
        row = next(row for row in result.rows if row.nodes == nodes)
        console.print(f"communication is {row.comm_share:.0%} of a step at {nodes} nodes; levers, each forecast alone:")
        for lever in levers:
            console.print(f"  {escape(lever.name)}: {lever.sample_speedup:.2f}x samples/s (step {lever.step_ms:.0f} ms, "
                          f"exposed {lever.comm_exposed_ms:.0f} ms) — {escape(lever.how)}; {escape(lever.note)}")
    console.print(f"picture: {picture}")
