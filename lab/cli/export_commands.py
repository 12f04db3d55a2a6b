"""`lab export`: the lab or an exercise in the formats a real setup uses."""

from __future__ import annotations

from pathlib import Path

import click

from lab.cli.console import errors
from lab.cli.options import name_option
from lab.nodes import lifecycle


@click.group()
def export():
    """Write the lab or an exercise in formats a real setup uses (compose, Slurm, Kubernetes)."""


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



@export.command("k8s", context_settings={"ignore_unknown_options": True})
@click.argument("target", nargs=-1, type=click.UNPROCESSED)
@click.option("--script", type=click.Path(path_type=Path), default=None, metavar="FILE",
              help="A torchrun script instead of an exercise; the other arguments are its arguments (after -- when they look like these options).")
@click.option("--nodes", type=click.IntRange(1, 4096), default=None, help="Pods (default: the exercise's, else 2).")
@click.option("--nproc-per-node", type=click.IntRange(1, 64), default=None,
              help="Processes per pod (default: the exercise's, else 1).")
@click.option("--image", default=None, metavar="IMAGE",
              help="Container image with Python 3 and torch (default: pytorch/pytorch:latest).")
@click.option("--gpus", type=click.IntRange(0, 64), default=0, show_default=True, help="nvidia.com/gpu per pod.")
@click.option("--claim", default=None, metavar="PVC",
              help="A ReadWriteMany PersistentVolumeClaim shared by the pods for results and snapshots "
                   "(default: an emptyDir per pod).")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None, help="File to write (default: stdout).")
def export_k8s(target, script, nodes, nproc_per_node, image, gpus, claim, output):
    """Kubernetes manifests (1.27+, no operators) running EXERCISE, or --script FILE [ARGS], with torchrun.

    An Indexed Job (JOB_COMPLETION_INDEX = node rank), a headless Service so the pods resolve each other, and a
    ConfigMap with the files. Apply with `kubectl apply -f FILE`.

    \b
    Examples:
      lab export k8s exercise03 --gpus 1 -o job.yaml
      lab export k8s --nodes 2 --nproc-per-node 4 --script train.py --epochs 3
    """
    from lab.errors import SpecError
    from lab.jobs import k8s
    from lab.jobs.exercises import find

    image = image or k8s.DEFAULT_IMAGE
    if script is not None:
        job = k8s.script_job(script, list(target), nodes or 2, nproc_per_node or 1, image, gpus, claim)
    elif len(target) == 1:
        found = find(target[0])
        job = k8s.exercise_job(found, nodes or found.nodes, nproc_per_node or found.nproc_per_node, image, gpus, claim)
    else:
        raise SpecError("give one EXERCISE, or --script FILE [ARGS]",
                        "e.g. lab export k8s exercise03, or lab export k8s --script train.py --epochs 3")
    _write(k8s.manifests_yaml(job), output)
