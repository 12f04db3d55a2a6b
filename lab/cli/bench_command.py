"""`lab bench`: the benchmarks under bench/."""

from __future__ import annotations

from pathlib import Path

import click

from lab.bench import DEFAULT_PARTS, PARTS as BENCH_PARTS


@click.command()
@click.option("--only", default=",".join(DEFAULT_PARTS), show_default=True, metavar="PARTS",
              help=f"Comma-separated parts: {', '.join(BENCH_PARTS)} (forecast, half an hour, only when named).")
@click.option("--max-nodes", type=click.IntRange(2, 64), default=32, show_default=True,
              help="Largest lab timed by the `up` part (2, 4, 8, ... up to this).")
@click.option("--cold", is_flag=True, help="Also time a full node image rebuild (a minute or more).")
@click.option("--rounds", type=click.IntRange(1, 20), default=2, show_default=True,
              help="Alternating container/native rounds (for `up`: sweeps over every size); the best of each is kept.")
@click.option("--name", default="bench", show_default=True, metavar="NAME", help="Lab the benchmarks use.")
@click.option("--keep", is_flag=True, help="Leave the bench lab up afterwards.")
@click.option("--results", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Folder for latest.json and allreduce.png (default: bench/results).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout (tables go to stderr).")
def bench(only, max_nodes, cold, rounds, name, keep, results, as_json):
    """Measure what the containers cost against the same work done natively, side by side.

    Prints nccl-tests style all_reduce tables (containers vs native processes on this host),
    `lab up` times, exercise03 wall times and idle node memory, each with its ratio and target.
    Raw results: bench/results/latest.json, plots: bench/results/allreduce.png, up.png and links.png. Method and the
    last measured numbers: bench/RESULTS.md.

    \b
    Examples:
      lab bench                              every part (about 5 minutes on 2 cores)
      lab bench --only allreduce --rounds 3  the bandwidth comparison only
      lab bench --only up --max-nodes 4      lab up of 2 and 4 nodes (default 2 to 32), s/node, plot
      lab bench --only forecast --name forecast  lab forecast from 2 nodes against real 4- and 8-node runs
    """
    from lab.bench import bench_argv, run_bench

    parts = [part.strip() for part in only.split(",") if part.strip()]
    run_bench(bench_argv(parts, max_nodes, cold, rounds, name, keep, as_json, results))

