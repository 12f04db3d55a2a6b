"""Exercise manifests: discovery, validation, and the per-node command each step launches.

A manifest (``exercise.yaml``) says how to launch an exercise, never where: the same
command is run by the Docker driver inside containers and by the local driver on the host.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lab import paths
from lab.errors import SpecError
from lab.model.requirements import normalise_requirement

LAUNCHERS = ("per-node", "torchrun")
RDZV_MODES = ("c10d", "static")
DIR_PATTERN = re.compile(r"^exercise(\d\d)_([a-z0-9_]+)$")
# A step's fault action -> what the runner kills on the fault's node (a mode of transports.KILL_SCRIPT).
FAULT_KILL_MODES = {"kill-worker": "worker", "kill-node": "all"}


def exercises_root() -> Path:
    """The exercises/ folder shipped with the package (the repository's own in a checkout)."""
    return paths.resource("exercises")


@dataclass(frozen=True)
class Step:
    name: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    expect: str = "pass"
    launcher: str = "per-node"
    program: str = ""
    rdzv: str = "c10d"
    max_restarts: int = 0
    nnodes: str = ""  # torchrun --nnodes override, e.g. "1:2" for elastic membership
    fault: tuple[tuple[str, str], ...] = ()
    timeout: int | None = None  # overrides the exercise's timeout for this step


@dataclass(frozen=True)
class Exercise:
    number: int
    name: str  # "exercise03"
    slug: str  # "torchrun"
    path: Path
    title: str
    summary: str
    nodes: int
    nproc_per_node: int
    timeout: int
    steps: tuple[Step, ...] = field(default_factory=tuple)
    requirements: tuple[str, ...] = ()  # packages the nodes need besides torch (`lab up --pip` lines)

    @property
    def folder(self) -> str:
        return self.path.name

    def load_checker(self):
        """Import the exercise's check.py and return its `check` function."""
        module_path = self.path / "check.py"
        spec = importlib.util.spec_from_file_location(f"lab_checker_{self.name}", module_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.check


def _strings(values, where: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if not isinstance(values, list):
        raise SpecError(f"{where} must be a list")
    return tuple(str(value) for value in values)


def _pairs(mapping, where: str) -> tuple[tuple[str, str], ...]:
    if mapping is None:
        return ()
    if not isinstance(mapping, dict):
        raise SpecError(f"{where} must be a mapping")
    return tuple((str(key), str(value)) for key, value in mapping.items())


def load_exercise(path: Path) -> Exercise:
    match = DIR_PATTERN.match(path.name)
    if not match:
        raise SpecError(f"'{path.name}' is not an exercise folder", "exercise folders are named exerciseNN_slug")
    manifest_path = path / "exercise.yaml"
    try:
        data = yaml.safe_load(manifest_path.read_text()) or {}
    except (OSError, yaml.YAMLError) as error:
        raise SpecError(f"cannot read {manifest_path}: {error}".splitlines()[0], "fix the manifest's YAML") from None
    if not isinstance(data, dict):
        raise SpecError(f"{manifest_path} is not a mapping")
    where = manifest_path.as_posix()
    defaults = {
        "launcher": data.get("launcher", "per-node"),
        "program": data.get("program", ""),
        "rdzv": data.get("rdzv", "c10d"),
        "max_restarts": data.get("max_restarts", 0),
        "nnodes": str(data.get("nnodes_range", "")),
    }
    raw_steps = data.get("steps") or [{"name": "main"}]
    steps = []
    for raw in raw_steps:
        merged = {**defaults, **raw}
        step = Step(
            name=str(merged.get("name", "main")),
            args=_strings(merged.get("args", data.get("args")), f"{where}: args"),
            env=_pairs({**(data.get("env") or {}), **(raw.get("env") or {})}, f"{where}: env"),
            expect=str(merged.get("expect", "pass")),
            launcher=str(merged["launcher"]),
            program=str(merged["program"]),
            rdzv=str(merged["rdzv"]),
            max_restarts=int(merged["max_restarts"]),
            nnodes=str(merged.get("nnodes", defaults["nnodes"]) or ""),
            fault=_pairs(raw.get("fault"), f"{where}: fault"),
            timeout=int(raw["timeout"]) if "timeout" in raw else None,
        )
        if step.launcher not in LAUNCHERS:
            raise SpecError(f"{where}: launcher '{step.launcher}' unknown", f"use one of {', '.join(LAUNCHERS)}")
        if step.rdzv not in RDZV_MODES:
            raise SpecError(f"{where}: rdzv '{step.rdzv}' unknown", f"use one of {', '.join(RDZV_MODES)}")
        if step.expect not in ("pass", "fail"):
            raise SpecError(f"{where}: expect must be pass or fail")
        if step.fault and dict(step.fault).get("action", "kill-worker") not in FAULT_KILL_MODES:
            raise SpecError(f"{where}: fault action '{dict(step.fault)['action']}' unknown",
                            f"use one of {', '.join(FAULT_KILL_MODES)}")
        if not step.program or not (path / step.program).is_file():
            raise SpecError(f"{where}: program '{step.program}' not found in {path.name}")
        steps.append(step)
    return Exercise(
        number=int(match.group(1)),
        name=f"exercise{match.group(1)}",
        slug=match.group(2),
        path=path,
        title=str(data.get("title", path.name)),
        summary=str(data.get("summary", "")),
        nodes=int(data.get("nodes", 2)),
        nproc_per_node=int(data.get("nproc_per_node", 1)),
        timeout=int(data.get("timeout", 120)),
        steps=tuple(steps),
        requirements=tuple(normalise_requirement(line, path, f"{where}: requirements")
                           for line in _strings(data.get("requirements"), f"{where}: requirements")),
    )


def discover(root: Path | None = None) -> list[Exercise]:
    root = root or exercises_root()
    folders = sorted(p for p in root.iterdir() if p.is_dir() and DIR_PATTERN.match(p.name)) if root.is_dir() else []
    if not folders:  # a package built without its exercises must not look like an empty curriculum
        raise SpecError(f"no exercises in {root}", "reinstall lab: `pip install .` in the repository bundles them "
                        "(as lab/_resources/exercises), or run it from a checkout")
    return [load_exercise(folder) for folder in folders]


def find(name: str, root: Path | None = None) -> Exercise:
    """Accept 'exercise03', '03', '3' or the folder name; only that exercise's manifest is read."""
    root = root or exercises_root()
    folders = sorted(p for p in root.iterdir() if p.is_dir() and DIR_PATTERN.match(p.name)) if root.is_dir() else []
    wanted = name.strip().lower()
    if wanted.isdigit():
        wanted = f"exercise{int(wanted):02d}"
    for folder in folders:
        if wanted in (folder.name, folder.name.split("_", 1)[0]):
            return load_exercise(folder)
    known = ", ".join(folder.name.split("_", 1)[0] for folder in folders) or "none"
    raise SpecError(f"no exercise named '{name}'", f"run `lab exercises` to list them (known: {known})")


# Every process of a job imports torch before it joins (~2.3 CPU-s each, measured in a node), and a lab's nodes share
# one host, so the last process joins later the bigger the world: 32 nodes x 1 took 47 s on 2 busy cores. Each
# timeout below was written for a small world and grows by SECONDS_PER_EXTRA_PROCESS for every process beyond it,
# twice what a process was measured to add. `lab run --timeout` and a step's own LAB_PG_TIMEOUT stay as given.
SECONDS_PER_EXTRA_PROCESS = 3
PG_TIMEOUT = 60  # init_process_group's timeout (LAB_PG_TIMEOUT) and torchrun's rendezvous join_timeout ...
PG_TIMEOUT_WORLD = (2, 2)  # ... written for 2 nodes x 2 processes


def job_processes(launcher: str, nnodes: int, nproc_per_node: int) -> int:
    """The Python processes a job starts that import torch: its ranks, plus torchrun's agent on every node."""
    return nnodes * (nproc_per_node + (launcher == "torchrun"))


def grown_timeout(seconds: int, processes: int, written_for: int) -> int:
    """`seconds`, written for a job of `written_for` processes, grown for one of `processes`; never shrunk."""
    return seconds + SECONDS_PER_EXTRA_PROCESS * max(0, processes - written_for)


def step_timeout(exercise: Exercise, step: Step, nnodes: int, nproc_per_node: int) -> int:
    """The step's timeout from its manifest (written for the manifest's nodes), grown for this world."""
    return grown_timeout(step.timeout or exercise.timeout, job_processes(step.launcher, nnodes, nproc_per_node),
                         job_processes(step.launcher, exercise.nodes, exercise.nproc_per_node))


def process_group_timeout(nnodes: int, nproc_per_node: int) -> int:
    """PG_TIMEOUT grown for this world, counted as torchrun's (an agent per node) whatever the launcher."""
    return grown_timeout(PG_TIMEOUT, job_processes("torchrun", nnodes, nproc_per_node),
                         job_processes("torchrun", *PG_TIMEOUT_WORLD))


@dataclass(frozen=True)
class LaunchContext:
    """Where one step runs: filled in by the runner for each node."""

    node_rank: int
    nnodes: int
    nproc_per_node: int
    master_addr: str
    master_port: int
    python: str
    exercises_dir: str  # where exercises/ is visible to the node
    results_dir: str  # this step's results folder, as the node sees it
    work_dir: str  # this run's shared scratch folder, as the node sees it
    run_id: str
    backend: str = "auto"
    pg_timeout: int | None = None  # None: process_group_timeout() for this world

    def __post_init__(self):
        if self.pg_timeout is None:  # frozen: fill in place
            object.__setattr__(self, "pg_timeout", process_group_timeout(self.nnodes, self.nproc_per_node))


# exercises/jobhooks/sitecustomize.py makes every Python process of a job write whole lines, one write() each, and
# write out torch's Flight Recorder where the lab asks (LAB_FLIGHT_DIR, lab/jobs/flight.py).
JOB_HOOKS_DIR = "jobhooks"
# torchrun --tee tags every worker line with this (torch reads it from the environment; there is no flag); the
# console shows it as "nodeI rR". torch's own excepthook and C++ logs use the same "[rankR]:" form.
RANK_PREFIX_TEMPLATE = "[rank${rank}]:"


def readable_output_env(exercises_dir: str, env: dict[str, str]) -> dict[str, str]:
    """`env` for a job whose output a person reads: no two processes' text on one line, every torchrun line tagged.

    The sitecustomize folder goes first on PYTHONPATH, with `env`'s own PYTHONPATH (the step's, the user's) after it,
    and in LAB_JOBHOOKS_DIR, which the node image's venv puts first on sys.path itself (docker/install-venv.sh): the
    hooks stay with a job whose own command sets PYTHONPATH anew.
    """
    hooks = f"{exercises_dir}/{JOB_HOOKS_DIR}"
    pythonpath = ":".join(part for part in (hooks, env.get("PYTHONPATH")) if part)
    return {"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": RANK_PREFIX_TEMPLATE, **env, "PYTHONPATH": pythonpath,
            "LAB_JOBHOOKS_DIR": hooks}


def step_command(exercise: Exercise, step: Step, ctx: LaunchContext) -> tuple[list[str], dict[str, str]]:
    """argv and environment for one node of one step."""
    program = f"{ctx.exercises_dir}/{exercise.folder}/{step.program}"
    env = {
        "NODE_RANK": str(ctx.node_rank),
        "NNODES": str(ctx.nnodes),
        "NPROC_PER_NODE": str(ctx.nproc_per_node),
        "MASTER_ADDR": ctx.master_addr,
        "MASTER_PORT": str(ctx.master_port),
        "LAB_STEP": step.name,
        "LAB_RESULTS_DIR": ctx.results_dir,
        "LAB_WORK_DIR": ctx.work_dir,
        "LAB_BACKEND": ctx.backend,
        "LAB_PG_TIMEOUT": str(ctx.pg_timeout),
        "PYTHONPATH": ctx.exercises_dir,
        "OMP_NUM_THREADS": "1",
    }
    env = readable_output_env(ctx.exercises_dir, {**env, **dict(step.env)})
    if step.launcher == "per-node":
        return [ctx.python, program, *step.args], env
    argv = torchrun_argv(ctx, rdzv=step.rdzv, max_restarts=step.max_restarts, nnodes=step.nnodes)
    return argv + [program, *step.args], env


# Elastic membership (--nnodes MIN:MAX): drop a lost node after 3 missed 1-s heartbeats and close a round 5 s after
# MIN nodes joined; torch's defaults (15 s, 30 s) outlast a lab step. The last call stays 5 s: a node that starts
# late on a busy host must still make the first round.
ELASTIC_RDZV_CONF = "last_call_timeout=5,keep_alive_interval=1,keep_alive_max_attempt=3"


def torchrun_argv(ctx: LaunchContext, rdzv: str = "c10d", max_restarts: int = 0, nnodes: str = "") -> list[str]:
    """torchrun's own options for one node: static ranks (--node-rank) or c10d rendezvous on the master.

    Run it with readable_output_env(): --tee tags worker lines with the template that environment names.
    """
    argv = [
        ctx.python, "-m", "torch.distributed.run",
        f"--nnodes={nnodes or ctx.nnodes}",
        f"--nproc-per-node={ctx.nproc_per_node}",
        f"--max-restarts={max_restarts}",
        "--tee=3",  # each worker's stdout+stderr through torchrun, whole lines tagged RANK_PREFIX_TEMPLATE
    ]
    if rdzv == "static":
        return argv + [f"--node-rank={ctx.node_rank}", f"--master-addr={ctx.master_addr}", f"--master-port={ctx.master_port}"]
    return argv + [
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={ctx.master_addr}:{ctx.master_port}",
        f"--rdzv-id={ctx.run_id}",
        f"--rdzv-conf=join_timeout={ctx.pg_timeout},is_host={str(ctx.node_rank == 0).lower()}"
        + (f",{ELASTIC_RDZV_CONF}" if ":" in nnodes else ""),
    ]
