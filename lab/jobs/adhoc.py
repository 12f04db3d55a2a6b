"""Run the user's own commands and scripts across the nodes: `lab exec` and `lab torchrun`.

Both copy what they need into the run's folder on the shared mount, run from there, stream
prefixed output, and keep a run record like an exercise run.
"""

from __future__ import annotations

import shutil
import string
from pathlib import Path

from lab import paths
from lab.analysis.explain import JobFacts, explain_launch, launch_failed
from lab.analysis.record import RunRecord, StepRecord, recording
from lab.errors import SpecError
from lab.jobs.checks import Check
from lab.jobs.exercises import LaunchContext, readable_output_env, torchrun_argv
from lab.jobs.launch import FAILED_NODE_GRACE, Reporter, launch
from lab.jobs.probes import ask_nodes
from lab.jobs.profiling import PROFILE_FOLDER, gather_rehearsal
from lab.jobs.staging import DEFAULT_COPY_LIMIT, CopyPlan, checked_copy, copy_planned
from lab.jobs.targets import Target

PLACEHOLDERS = ("node_rank", "nnodes", "rank", "world_size", "master_addr", "master_port")
DEFAULT_TIMEOUT = 3600
MODULE_FLAGS = ("-m", "--module")  # `lab torchrun -m pkg.mod ARGS`: torchrun's own spelling
NODE_PYTHONS = ("python", "python3")  # as `lab exec`'s command: the node's interpreter, whatever the image calls it


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


def with_node_python(argv: list[str], python: str) -> list[str]:
    """`python ...` / `python3 ...` run the interpreter the lab found on the nodes (the lab's venv, an image's
    /usr/bin/python3 or /opt/conda/bin/python), which has torch, whichever of the two names the image lacks."""
    return [python, *argv[1:]] if argv and argv[0] in NODE_PYTHONS else argv


def parse_env(pairs: tuple[str, ...]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise SpecError(f"--env '{pair}' is not KEY=VALUE", "e.g. --env NCCL_DEBUG=INFO")
        env[key] = value
    return env


def _checked_copy(copy: Path | None, copy_limit: int) -> CopyPlan | None:
    """What a run will copy of a folder, refused before the run exists when it is too big; None for a file or nothing."""
    if copy is not None and not copy.exists():
        raise SpecError(f"'{copy}' does not exist", "give a file or folder on this machine")
    return checked_copy(copy, paths.state_dir().resolve(), copy_limit) if copy is not None and copy.is_dir() else None


def _stage(target: Target, run_id: str, copy: Path | None, plan: CopyPlan | None) -> str:
    """Create the run's folder on the shared folder, with `copy` in it, on every node; return its path on the nodes."""
    relative = f"runs/{run_id}/work"
    host = target.transport.host_shared_dir / relative
    host.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        copy_planned(plan, host / copy.name)
    elif copy is not None:
        shutil.copy2(copy, host / copy.name)
    target.share(relative)
    return f"{target.transport.shared_dir}/{relative}"


def _launch_recorded(record: RunRecord, target: Target, commands: dict, timeout: int | None, reporter: Reporter,
                     cwd: str, facts: JobFacts, fail_grace: float | None, profile: bool = False,
                     calibrate: bool = True) -> RunRecord:
    """launch() and keep a run record whatever happens: passed, failed, interrupted or engine lost.

    A run that did not pass gets a diagnosis (explain.py) from its logs, exit codes, what the nodes answered when asked
    right after it (probes.py) and, when it hung, stacks.
    `profile`: its processes profile a few steady steps, and a run that passed gets the rehearsal's facts and a
    calibration of the link (profiling.py) for `lab forecast`.
    """
    step = StepRecord("main", command=list(facts.command))
    record.steps = [step]
    with recording(record):
        result = launch(target.transport, commands, record.run_id, timeout or DEFAULT_TIMEOUT, reporter, cwd=cwd,
                        fail_grace=fail_grace, stacks_dir=record.stacks_dir,
                        profile_dir=record.path / PROFILE_FOLDER if profile else None)
        failed = {node: code for node, code in result.exit_codes.items() if code != 0}
        record.checks = [Check("every node exited 0", not failed, f"exit codes {failed}" if failed else "")]
        record.status = "passed" if not failed else "failed"
        step.exit_codes, step.timed_out, step.seconds = result.exit_codes, result.timed_out, result.seconds
        step.oom_killed, step.problem = result.oom_killed, result.stopped or None
        step.nproc_per_node, step.master_port = facts.nproc_per_node, facts.master_port
        step.started_at, step.node_exits, step.stopped_at = result.started_at, result.node_exits, result.stopped_at
        step.hand_faults = result.hand_faults
        record.save_logs(step.name, result.logs)
        if launch_failed(result):
            probes = ask_nodes(target.transport, commands, result.logs, cwd, target.workspace)
            step.probes = probes.to_dict()
            record.diagnosis = explain_launch(result, facts, target.transport.faults(), probes=probes)
        elif profile:
            gather_rehearsal(target, record.path, record.run_id, facts.nproc_per_node, list(facts.command), reporter,
                             calibrate)
    return record


def run_exec(target: Target, nodes: list[int] | None, argv: list[str], env: dict[str, str], copy: Path | None,
             timeout: int | None, reporter: Reporter, master_port: int | None = None,
             fail_grace: float | None = FAILED_NODE_GRACE, copy_limit: int = DEFAULT_COPY_LIMIT,
             profile: bool = False) -> RunRecord:
    """Run `argv` on `nodes` (None: every node), one process per node, placeholders filled per node."""
    if not argv:
        raise SpecError("no command given", "put it after --, e.g. lab exec --all -- hostname")
    nnodes = target.nnodes
    nodes = list(range(nnodes)) if nodes is None else nodes
    if any(index >= nnodes for index in nodes):
        raise SpecError(f"'{target.label}' has nodes 0..{nnodes - 1}", "see `lab status`, or leave out --node")
    planned = _checked_copy(copy, copy_limit)
    target.prepare(1, reporter)
    record = RunRecord.new("exec", target.label)
    node_dir = _stage(target, record.run_id, copy, planned)
    transport = target.transport
    port = transport.pick_port(master_port)
    commands = {}
    for index in nodes:
        values = {"node_rank": index, "nnodes": nnodes, "rank": index, "world_size": nnodes,
                  "master_addr": transport.master_addr, "master_port": port}
        node_env = readable_output_env(transport.exercises_dir, _with_workspace(target, {
            "MASTER_ADDR": transport.master_addr, "MASTER_PORT": str(port), "NODE_RANK": str(index),
            "NNODES": str(nnodes), **dict(zip(env, fill_placeholders(list(env.values()), values)))}))
        commands[index] = (with_node_python(fill_placeholders(argv, values), transport.python), node_env)
    reporter.event(f"exec on {', '.join(f'node{i}' for i in nodes)}: {' '.join(argv)}")
    facts = _job_facts(target, 1, port, env, argv)
    cwd = target.workspace if target.workspace and copy is None else node_dir  # what --copy brings is in the run's folder
    return _launch_recorded(record, target, commands, timeout, reporter, cwd, facts, fail_grace, profile)


def run_torchrun(target: Target, nproc_per_node: int | None, rdzv: str, script: Path, args: list[str],
                 env: dict[str, str], timeout: int | None, reporter: Reporter,
                 master_port: int | None = None, fail_grace: float | None = FAILED_NODE_GRACE,
                 copy_limit: int = DEFAULT_COPY_LIMIT, profile: bool = False, calibrate: bool = True) -> RunRecord:
    """torchrun an unmodified script (or, with SCRIPT `-m`, a module) on every node.

    A script in the lab's workspace runs where it is, from the workspace; any other script's folder is copied to the
    run's shared folder and runs from there. `nproc_per_node` None: the lab's default (`lab up --nproc-per-node`), else 1.
    """
    module = str(script) in MODULE_FLAGS
    if module and not args:
        raise SpecError("-m needs a module name", "e.g. lab torchrun -m mypkg.train --epochs 3")
    if not module and not script.is_file():
        raise SpecError(f"script '{script}' not found", "give the path of a Python file on this machine")
    in_workspace = module or (target.workspace is not None and Path(target.workspace) in script.resolve().parents)
    copied = None if in_workspace else script.resolve().parent
    planned = _checked_copy(copied, copy_limit)
    nproc_per_node = nproc_per_node or target.nproc_per_node or 1
    target.prepare(nproc_per_node, reporter)
    record = RunRecord.new("torchrun", target.label)
    node_dir = _stage(target, record.run_id, copied, planned)
    if module:
        program, cwd = ["-m", *args[:1]], target.workspace or node_dir
        args = args[1:]
    elif copied is None:
        program, cwd = [str(script.resolve())], target.workspace
    else:
        program, cwd = [f"{node_dir}/{copied.name}/{script.name}"], node_dir
    transport = target.transport
    port = transport.pick_port(master_port)
    commands = {}
    for index in range(target.nnodes):
        ctx = LaunchContext(node_rank=index, nnodes=target.nnodes, nproc_per_node=nproc_per_node,
                            master_addr=transport.master_addr, master_port=port, python=transport.python,
                            exercises_dir=transport.exercises_dir, results_dir=node_dir, work_dir=node_dir,
                            run_id=record.run_id)
        commands[index] = (torchrun_argv(ctx, rdzv=rdzv) + [*program, *args],
                           readable_output_env(transport.exercises_dir,
                                               _with_workspace(target, {"OMP_NUM_THREADS": "1", **env})))
    name = program[-1] if module else script.name
    reporter.event(f"torchrun {name} on {target.nnodes} node(s) x {nproc_per_node} ({rdzv} rendezvous)")
    facts = _job_facts(target, nproc_per_node, port, env, [name, *args])
    return _launch_recorded(record, target, commands, timeout, reporter, cwd, facts, fail_grace, profile, calibrate)


def _with_workspace(target: Target, env: dict[str, str]) -> dict[str, str]:
    """`env` with the workspace after the user's own PYTHONPATH, so its packages import from any folder."""
    if not target.workspace:
        return env
    return {**env, "PYTHONPATH": ":".join(part for part in (env.get("PYTHONPATH"), target.workspace) if part)}


def _job_facts(target: Target, nproc_per_node: int, port: int, env: dict[str, str], command: list[str]) -> JobFacts:
    """What the diagnosis of a user's job may use: the nodes, the rendezvous the lab gave, what the user passed."""
    return JobFacts(target.hostnames, nproc_per_node, "auto", target.transport.master_addr, port, target.node_gpus,
                    target.memory_limit, tuple(env.items()), tuple(command))
