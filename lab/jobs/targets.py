"""Where a run goes: the containers of a lab, processes on this host, or the real hosts of an ansible inventory.

Each is a `Target`: a transport that starts processes on its nodes, and the nodes' facts. `lab run`,
`lab exec` and `lab torchrun` resolve one from their options (`resolve`) and run through it the same way.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass
from pathlib import Path

from lab import paths
from lab.analysis.record import RunRecord
from lab.errors import SpecError
from lab.jobs.exercises import Exercise, exercises_root
from lab.jobs.launch import FAILED_NODE_GRACE, Reporter
from lab.jobs.runner import RunOptions, run_exercise
from lab.jobs.staging import DEFAULT_COPY_LIMIT, checked_copy
from lab.jobs.transports import DockerTransport, LocalTransport, Transport
from lab.model.requirements import requirement_names
from lab.model.spec import format_bytes
from lab.nodes import lifecycle as labs
from lab.nodes.gpus import run_backend
from lab.provision import inventory as real_hosts

CONTAINERS, HOST = "containers", "host"
DEFAULT_HOST_NODES = 2
HOST_LABEL = "local"  # the `lab` of records of runs on this host


@dataclass(frozen=True)
class Target:
    """The nodes of a run: how to start processes on them, and what they are."""

    transport: Transport
    hostnames: tuple[str, ...]  # node i's name
    label: str  # kept as the record's `lab`: the lab's name, 'local', or 'inventory-<file>'
    node_gpus: tuple[tuple[str, ...], ...] | None = None  # GPUs per node; None: not known here, each node decides
    nproc_per_node: int | None = None  # the lab's default processes per node; None: each job's own
    inventory: real_hosts.Inventory | None = None  # real hosts, provisioned before every run
    memory_limit: str | None = None  # each node's memory limit, as `lab status` shows it; None: none or unknown
    workspace: str | None = None  # the project folder every node sees at this same path (`lab up --workspace`)
    packages: tuple[str, ...] = ()  # the distributions the lab's requirements name (`lab doctor` compares them)
    link: str | None = None  # how the lab's links are shaped (`lab up --link`, normalised); None: unshaped or unknown
    cpus: float | None = None  # each node's CPU limit (`lab up --cpus`); None: none or unknown

    @property
    def nnodes(self) -> int:
        return len(self.hostnames)

    def prepare(self, nproc_per_node: int, reporter: Reporter) -> None:
        """Make the nodes ready for a run: a lab's containers are (`lab up`); real hosts get the playbook."""
        if self.inventory is not None:
            for node in real_hosts.provision(self.inventory, nproc_per_node).nodes:
                reporter.event(node.summary())
            if self.workspace:
                self._sync_workspace(reporter)

    def _sync_workspace(self, reporter: Reporter) -> None:
        """Real hosts get the workspace copied to the same path, only when its files changed since their copy."""
        plan = checked_copy(Path(self.workspace), paths.state_dir().resolve(), DEFAULT_COPY_LIMIT)
        copied = self.transport.sync_folder(plan, self.workspace)
        reporter.event(f"workspace {self.workspace}: " + (
            f"copied to {', '.join(copied)} ({len(plan.files)} files, {format_bytes(plan.size)})" if copied
            else "unchanged since the last copy on every host"))

    def share(self, relative: str) -> None:
        """Make a folder staged under the transport's host_shared_dir visible under shared_dir on every node."""
        if self.inventory is not None:  # real hosts share no folder with this machine: copy it over ssh
            self.transport.push(relative)


def containers(name: str) -> Target:
    """The running lab `name` (one `lifecycle.require`: a lab that is not up is a one-line error)."""
    driver, spec, states = labs.require(name)
    return Target(DockerTransport(driver, name, paths.lab_dir(name) / "shared"),
                  tuple(state.hostname for state in states), name,
                  node_gpus=tuple(tuple(state.gpus) for state in states), nproc_per_node=spec.nproc_per_node,
                  memory_limit=format_bytes(spec.memory) if spec.memory else None, workspace=spec.workspace,
                  packages=tuple(requirement_names(spec.requirements)), link=spec.link, cpus=spec.cpus)


def host_processes(nodes: int) -> Target:
    """`nodes` 'nodes' that are process groups on this host, rendezvous on loopback (a native baseline)."""
    return Target(LocalTransport(paths.state_dir() / "local" / "shared", exercises_root()),
                  (platform.node(),) * nodes, HOST_LABEL)


def inventory_hosts(path: Path) -> Target:
    """The hosts of an ansible INI inventory, over ssh; an unreadable inventory is a one-line error."""
    inventory = real_hosts.parse_inventory(path)
    return Target(real_hosts.transport(inventory), tuple(name for name, _ in inventory.hosts), inventory.label,
                  inventory=inventory, workspace=inventory.workspace)


def resolve(on: str | None, name: str, inventory: Path | None = None, nodes: int | None = None) -> Target:
    """The target that `--on`, `--name`, `--inventory` and `--nodes` name; options that conflict are a SpecError.

    `on` None: the lab's containers, or the inventory's hosts when one is given.
    """
    if inventory is not None:
        if on is not None:
            raise SpecError(f"--inventory runs on the inventory's hosts; it does not go with --on {on}",
                            "leave out --on, or --inventory")
        if nodes is not None:
            raise SpecError("--nodes goes with --on host; an inventory's nodes are its hosts",
                            "list the hosts under [nodes] in the inventory")
        return inventory_hosts(inventory)
    if on == HOST:
        return host_processes(nodes or DEFAULT_HOST_NODES)
    if nodes is not None:
        raise SpecError("--nodes goes with --on host; a lab has the nodes it was started with",
                        "`lab up --nodes N --recreate` for another count")
    return containers(name)


def run_exercises(exercises: list[Exercise], target: Target, nproc_per_node: int | None, backend: str,
                  timeout: int | None, reporter: Reporter, master_port: int | None = None,
                  fail_grace: float | None = FAILED_NODE_GRACE) -> list[RunRecord]:
    """Run the exercises on `target` in order; every run keeps its own record."""
    nproc_per_node = nproc_per_node or target.nproc_per_node
    target.prepare(nproc_per_node or max(exercise.nproc_per_node for exercise in exercises), reporter)
    options = RunOptions(nproc_per_node=nproc_per_node, backend=backend, timeout=timeout, master_port=master_port,
                         fail_grace=fail_grace)
    return [run_exercise(exercise, target, _resolved_backend(options, exercise, target), reporter)
            for exercise in exercises]


def _resolved_backend(options: RunOptions, exercise: Exercise, target: Target) -> RunOptions:
    """`auto` made gloo or nccl from the lab's GPUs, the same on every node; nccl refused where it would hang."""
    if target.node_gpus is None:
        return options
    nproc = options.nproc_per_node or exercise.nproc_per_node
    return dataclasses.replace(options, backend=run_backend(options.backend, [list(gpus) for gpus in target.node_gpus],
                                                            nproc, target.label))
