"""Run the user's own commands and scripts across the nodes: `lab exec` and `lab torchrun`.

Both copy what they need into the run's folder on the shared mount, run from there, stream
prefixed output, and keep a run record like an exercise run.
"""

from __future__ import annotations

import shutil
import string
from pathlib import Path

from lab import paths
from lab.jobs.checks import Check
from lab.errors import SpecError
from lab.jobs.exercises import LaunchContext, torchrun_argv
from lab.jobs.runner import Reporter, RunRecord, launch, new_run_id, recording, save_logs
from lab.jobs.transports import Transport

PLACEHOLDERS = ("node_rank", "nnodes", "rank", "world_size", "master_addr", "master_port")
DEFAULT_TIMEOUT = 3600


def fill_placeholders(argv: list[str], values: dict[str, object]) -> list[str]:
    """Replace {node_rank}, {rank}, ... in every argument; unknown names are an error, {{ }} escapes."""
    filled = []
    for arg in argv:
        try:
            names = [field for _, field, _, _ in string.Formatter().parse(arg) if field is not None]
            unknown = [name for name in names if name not in values]
            if unknown:
                raise SpecError(f"unknown placeholder {{{unknown[0]}}} in '{arg}'",
                                f"known: {', '.join('{' + name + '}' for name in PLACEHOLDERS)}")
            filled.append(arg.format(**values))
        except ValueError as error:
            raise SpecError(f"cannot fill placeholders in '{arg}': {error}", "write a literal brace as {{ or }}") from None
    return filled


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise SpecError(f"--env '{pair}' is not KEY=VALUE", "e.g. --env NCCL_DEBUG=INFO")
        env[key] = value
    return env


def _stage(transport: Transport, run_id: str, copy: Path | None) -> tuple[str, str]:
    """Create the run folder on the shared mount, copy `copy` into it; return (host path, node path)."""
    host = transport.host_shared_dir / "runs" / run_id / "work"
    host.mkdir(parents=True, exist_ok=True)
    if copy is not None:
        if not copy.exists():
            raise SpecError(f"'{copy}' does not exist", "give a file or folder on this machine")
        if copy.is_dir():
            shutil.copytree(copy, host / copy.name, dirs_exist_ok=True)
        else:
            shutil.copy2(copy, host / copy.name)
    return str(host), f"{transport.shared_dir}/runs/{run_id}/work"


def _launch_recorded(label: str, lab_name: str, run_id: str, command: list[str], transport: Transport,
                     commands: dict, timeout: int | None, reporter: Reporter, cwd: str) -> RunRecord:
    """launch() and keep a run record whatever happens: passed, failed, interrupted or engine lost."""
    record = RunRecord(run_id, label, lab_name, paths.runs_dir() / run_id)
    step = {"step": "main", "command": command}
    record.steps = [step]
    with recording(record):
        result = launch(transport, commands, run_id, timeout or DEFAULT_TIMEOUT, reporter, cwd=cwd)
        failed = {node: code for node, code in result.exit_codes.items() if code != 0}
        record.checks = [Check("every node exited 0", not failed, f"exit codes {failed}" if failed else "")]
        record.status = "passed" if not failed else "failed"
        step.update(exit_codes=result.exit_codes, timed_out=result.timed_out, seconds=round(result.seconds, 2),
                    oom_killed=result.oom_killed)
        save_logs(record.path, "main", result.logs)
    return record


def run_exec(transport: Transport, lab_name: str, nnodes: int, nodes: list[int], argv: list[str], env: dict[str, str],
             copy: Path | None, timeout: int | None, reporter: Reporter, master_port: int | None = None) -> RunRecord:
    """Run `argv` on `nodes`, one process per node, placeholders filled per node."""
    if not argv:
        raise SpecError("no command given", "put it after --, e.g. lab exec --all -- hostname")
    run_id = new_run_id("exec")
    _, node_dir = _stage(transport, run_id, copy)
    port = transport.pick_port(master_port)
    commands = {}
    for index in nodes:
        values = {"node_rank": index, "nnodes": nnodes, "rank": index, "world_size": nnodes,
                  "master_addr": transport.master_addr, "master_port": port}
        node_env = {"MASTER_ADDR": transport.master_addr, "MASTER_PORT": str(port), "NODE_RANK": str(index),
                    "NNODES": str(nnodes), "PYTHONUNBUFFERED": "1", **env}
        commands[index] = (fill_placeholders(argv, values), node_env)
    reporter.event(f"exec on {', '.join(f'node{i}' for i in nodes)}: {' '.join(argv)}")
    return _launch_recorded("exec", lab_name, run_id, argv, transport, commands, timeout, reporter, node_dir)


def run_torchrun(transport: Transport, lab_name: str, nnodes: int, nproc_per_node: int, rdzv: str, script: Path,
                 args: list[str], env: dict[str, str], timeout: int | None, reporter: Reporter,
                 master_port: int | None = None) -> RunRecord:
    """torchrun an unmodified script on every node; its folder is copied to the run's shared folder."""
    if not script.is_file():
        raise SpecError(f"script '{script}' not found", "give the path of a Python file on this machine")
    run_id = new_run_id("torchrun")
    _, node_dir = _stage(transport, run_id, script.resolve().parent)
    node_script = f"{node_dir}/{script.resolve().parent.name}/{script.name}"
    port = transport.pick_port(master_port)
    commands = {}
    for index in range(nnodes):
        ctx = LaunchContext(node_rank=index, nnodes=nnodes, nproc_per_node=nproc_per_node,
                            master_addr=transport.master_addr, master_port=port, python=transport.python,
                            exercises_dir=transport.exercises_dir, results_dir=node_dir, work_dir=node_dir,
                            run_id=run_id)
        commands[index] = (torchrun_argv(ctx, rdzv=rdzv) + [node_script, *args],
                           {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **env})
    reporter.event(f"torchrun {script.name} on {nnodes} node(s) x {nproc_per_node} ({rdzv} rendezvous)")
    return _launch_recorded("torchrun", lab_name, run_id, [script.name, *args], transport, commands, timeout, reporter,
                            node_dir)
