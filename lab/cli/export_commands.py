"""`lab export`: the lab or an exercise in the formats a real setup uses."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.console import errors
from lab.cli.options import name_option
from lab.nodes import lifecycle


@click.group()
def export():
    """Write the lab or an exercise in formats a real setup uses (compose, Slurm)."""


def _write(text: str, output: Path | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    output.write_text(text)
    errors.print(f"wrote {output}")


@export.command("compose")
@name_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write (default: stdout).")
def export_compose(name, output):
    """A docker-compose.yml equivalent to the running lab (same image, mounts, labels, network)."""
    from lab.nodes.compose import compose_yaml

    lifecycle.require(name)
    _write(compose_yaml(name), output)


@export.command("slurm")
@click.argument("exercise")
@click.option("--nodes", type=click.IntRange(1, 4096), default=None, help="Nodes to ask for (default: the exercise's).")
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None, help="Processes per node (default: the exercise's).")
@click.option("--gpus-per-node", type=click.IntRange(0, 64), default=0, show_default=True)
@click.option("--partition", default=None, help="Slurm partition.")
@click.option("--time", "time_limit", default="00:30:00", show_default=True, help="Slurm time limit.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write (default: stdout).")
def export_slurm(exercise, nodes, nproc_per_node, gpus_per_node, partition, time_limit, output):
    """An sbatch script running EXERCISE with srun + torchrun (head node = rendezvous)."""
    from lab.jobs.exercises import find
    from lab.jobs.slurm import slurm_script

    found = find(exercise)
    _write(slurm_script(found, nodes or found.nodes, nproc_per_node or found.nproc_per_node, gpus_per_node,
                        partition, time_limit), output)

