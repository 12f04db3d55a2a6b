"""Commands for a lab that runs Slurm (`lab up --scheduler slurm`): `lab sbatch`, and `lab ssh` into a node."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import click

from lab.cli.console import LiveReporter, console
from lab.cli.options import json_option, name_option
from lab.errors import HostError, SpecError


@click.command("sbatch", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--timeout", type=click.IntRange(1, 86400), default=None,
              help="Seconds before the job is cancelled (default 3600; its own --time still applies).")
@name_option
@json_option
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def sbatch_command(timeout, name, as_json, script, args):
    """Submit a batch SCRIPT to the lab's Slurm cluster from node0, follow it, and print its output.

    The script runs from this run's folder on the shared mount (LAB_EXERCISES=/lab/exercises is exported), so a
    script from `lab export slurm EXERCISE` runs unchanged and is checked like `lab run` checks the exercise.

    \b
    Example:
      lab up --nodes 2 --scheduler slurm
      lab export slurm exercise03 -o job.sh && lab sbatch job.sh
    """
    from lab.jobs.sbatch import run_sbatch

    with LiveReporter(as_json) as reporter:
        record = run_sbatch(name, script, list(args), timeout, reporter)
    if as_json:
        print(json.dumps(record.to_dict(), indent=2))
    else:
        failed = [check for check in record.checks if not check.passed]
        console.print(f"sbatch: {record.status.upper()} in {record.seconds:.1f} s; record: {record.path}")
        for check in failed:
            console.print(f"  FAIL {check.name}" + (f": {check.detail}" if check.detail else ""))
    if not record.passed:
        sys.exit(1)


@click.command("ssh", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@name_option
@click.argument("node")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def ssh_command(name, node, command):
    """Open a shell on NODE (node0, node1, ... or its index) as root, or run COMMAND there.

    With the lab's own key, accepting only the host key pinned when the node started. COMMAND's arguments reach
    the node as they are; for shell syntax run `sh -c '...'`.

    \b
    Examples:
      lab ssh node0                  then: sinfo; sbatch ...; squeue
      lab ssh node1 nproc
    """
    from lab import paths
    from lab.nodes import lifecycle
    from lab.nodes.sshkeys import checked_key, known_hosts_path
    from lab.provision.ansible import PINNED_HOST_KEY_TYPE

    _, spec, states = lifecycle.require(name)
    index = node.removeprefix("node")
    state = next((s for s in states if str(s.index) == index), None)
    if state is None:
        raise SpecError(f"lab '{name}' has no node '{node}'", f"its nodes are node0..node{spec.nodes - 1}")
    ssh = shutil.which("ssh")
    if ssh is None:
        raise HostError("no ssh client on this host", "install openssh-client")
    folder = paths.lab_dir(name) / "ssh"
    key, _ = checked_key(folder)
    argv = [ssh, "-i", str(key), "-p", str(state.ssh_port), "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={known_hosts_path(folder)}", "-o", f"HostKeyAlgorithms={PINNED_HOST_KEY_TYPE}",
            "-o", "LogLevel=ERROR",
            *(["-t"] if not command and sys.stdin.isatty() else []), "root@127.0.0.1",
            *([shlex.join(command)] if command else [])]
    os.execv(ssh, argv)
