"""What the runner knows after a run: each node's exit, log and environment, the launch facts, the
lab's faults, the stacks it took, and what the nodes answered when asked after it (NodeProbes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterable, Protocol

from lab.analysis.flight import RankTrace
from lab.analysis.stacks import ProcessStack


@dataclass
class NodeEvidence:
    index: int
    hostname: str
    exit_code: int | None  # None: still running when the lab stopped it
    oom_killed: bool = False
    lines: list[str] = field(default_factory=list)  # torchrun agent + workers, combined
    interfaces: list[str] = field(default_factory=list)
    gpus: int = 0
    memory_limit: str | None = None  # e.g. '2g', as `lab up --memory` set it
    exited_at: float | None = None  # wall clock when its command ended (None: still running when stopped)


@dataclass(frozen=True)
class PathFacts:
    """One path a failed run's errors named, as one node saw it after the run (lab/jobs/probes.py asks)."""

    path: str  # as the error or the command wrote it
    absolute: str  # resolved against the job's working directory on that node
    kind: str | None  # 'file', 'dir', 'other'; None: it does not exist there
    size: int | None = None
    parent: bool = False  # whether its folder exists
    existing: str = "/"  # the deepest folder of the path that exists
    close: str | None = None  # a name in `existing` close to the missing one (a typo's likely target)
    link: str | None = None  # where the name is a symbolic link to nothing: the target it holds

    @classmethod
    def from_dict(cls, data: dict) -> PathFacts:
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__ if key in data})


@dataclass
class NodeFacts:
    """What one node answered: its hostname and interpreter, and the paths, commands and variables asked about."""

    node: int
    hostname: str = ""
    python: str = ""  # the interpreter the lab runs there (the image's found one)
    interfaces: list[str] = field(default_factory=list)
    paths: dict[str, PathFacts] = field(default_factory=dict)
    commands: dict[str, str | None] = field(default_factory=dict)  # name -> where it is on the job's PATH (None: not)
    env: dict[str, bool] = field(default_factory=dict)  # name -> set in the environment the job got
    rendezvous: list[dict] = field(default_factory=list)  # FileStore/file:// paths in the job's code: path, where, text
    shm: dict = field(default_factory=dict)  # /dev/shm: size, free (bytes), largest: [{path, size, mtime}]
    error: str = ""  # why the node did not answer ('' when it did)

    @classmethod
    def from_dict(cls, data: dict) -> NodeFacts:
        return cls(node=int(data["node"]), hostname=str(data.get("hostname") or ""),
                   python=str(data.get("python") or ""), interfaces=list(data.get("interfaces") or []),
                   paths={path: PathFacts.from_dict(facts) for path, facts in (data.get("paths") or {}).items()},
                   commands=dict(data.get("commands") or {}),
                   env={name: bool(present) for name, present in (data.get("env") or {}).items()},
                   rendezvous=list(data.get("rendezvous") or []), shm=dict(data.get("shm") or {}),
                   error=str(data.get("error") or ""))


@dataclass
class NodeProbes:
    """Every node's answers after a run that did not end well, and what the nodes share (the record's `probes`)."""

    nodes: list[NodeFacts]
    shared: list[str] = field(default_factory=list)  # folders every node sees alike, writable one first ('/': one host)
    workspace: str | None = None  # the project folder every node sees (`lab up --workspace`), one of `shared`
    launcher_env: list[str] = field(default_factory=list)  # variables the launcher gives each worker (torchrun's)
    seconds: float = 0.0  # how long asking took

    def of(self, node: int) -> NodeFacts | None:
        return next((facts for facts in self.nodes if facts.node == node and not facts.error), None)

    def answered(self) -> list[NodeFacts]:
        return [facts for facts in self.nodes if not facts.error]

    def on_shared_folder(self, absolute: str) -> bool:
        return any(absolute == folder or absolute.startswith(folder.rstrip("/") + "/") for folder in self.shared)

    def to_dict(self) -> dict:
        """As the run record keeps it (StepRecord.probes)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> NodeProbes | None:
        """The record's `probes` (None in records from before the lab asked the nodes)."""
        if not data:
            return None
        return cls(nodes=[NodeFacts.from_dict(node) for node in data.get("nodes") or []],
                   shared=list(data.get("shared") or []), workspace=data.get("workspace"),
                   launcher_env=list(data.get("launcher_env") or []),
                   seconds=float(data.get("seconds") or 0))


@dataclass(frozen=True)
class Fault:
    node: int
    action: str  # a lab fault: 'kill-worker', 'kill-node', 'kill', 'stop', 'pause', 'partition', 'delay', ...


@dataclass
class Evidence:
    nodes: list[NodeEvidence]
    nnodes: int
    nproc_per_node: int = 1
    world_size: int | None = None  # None: nnodes * nproc_per_node
    backend: str = "auto"
    master_addr: str | None = None
    master_port: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # what the user added (--env)
    command: list[str] = field(default_factory=list)  # the user's command line
    faults: list[Fault] = field(default_factory=list)
    timed_out: bool = False
    stopped: str = ""  # why the run was stopped early ('interrupted', ...), '' if it was not
    processes: list[ProcessStack] = field(default_factory=list)
    traces: list[RankTrace] = field(default_factory=list)  # each process's Flight Recorder (lab/analysis/flight.py)
    probes: NodeProbes | None = None  # what the nodes answered after the run (None: not asked)
    started_at: float | None = None  # wall clock when the first node's command started (None: not known)

    @property
    def expected_world_size(self) -> int:
        return self.world_size or self.nnodes * self.nproc_per_node

    @property
    def failed(self) -> bool:
        return (self.timed_out or bool(self.stopped) or any(node.oom_killed for node in self.nodes)
                or any(node.exit_code != 0 for node in self.nodes))


class LaunchOutcome(Protocol):
    """What runner.launch() returns (runner.LaunchResult)."""
    exit_codes: dict[int, int | None]
    logs: dict[int, str]
    timed_out: bool
    oom_killed: list[int]
    node_exits: dict[int, float]
    started_at: float


def evidence_from_launch(result: LaunchOutcome, *, nnodes: int, nproc_per_node: int = 1, backend: str = "auto",
                         master_addr: str | None = None, master_port: int | None = None,
                         hostnames: dict[int, str] | None = None, interfaces: dict[int, list[str]] | None = None,
                         gpus: dict[int, int] | None = None, memory_limit: str | None = None,
                         faults: Iterable[tuple[int, str]] = (), env: dict[str, str] | None = None,
                         command: list[str] | None = None, stopped: str = "",
                         processes: list[ProcessStack] | None = None, traces: list[RankTrace] | None = None,
                         probes: NodeProbes | None = None) -> Evidence:
    """Evidence from a launch result plus what the runner knows of the lab.

    `hostnames`/`interfaces`/`gpus` are per node index (missing: 'node<i>', unknown, 0);
    `faults` are the (node, action) pairs the lab injected during the run; `probes` what the nodes answered after
    it (their interfaces too, where `interfaces` does not give them).
    """
    hostnames, interfaces, gpus = hostnames or {}, interfaces or {}, gpus or {}
    if probes is not None:
        interfaces = {**{facts.node: facts.interfaces for facts in probes.answered() if facts.interfaces}, **interfaces}
    nodes = [NodeEvidence(index=index, hostname=hostnames.get(index, f"node{index}"),
                          exit_code=result.exit_codes.get(index), oom_killed=index in result.oom_killed,
                          lines=result.logs.get(index, "").splitlines(), interfaces=list(interfaces.get(index, [])),
                          gpus=gpus.get(index, 0), memory_limit=memory_limit,
                          exited_at=result.node_exits.get(index))
             for index in sorted(set(result.exit_codes) | set(result.logs))]
    return Evidence(nodes=nodes, nnodes=nnodes, nproc_per_node=nproc_per_node, backend=backend,
                    master_addr=master_addr, master_port=master_port, env=dict(env or {}), command=list(command or []),
                    faults=[Fault(int(node), action) for node, action in faults], timed_out=result.timed_out,
                    stopped=stopped, processes=list(processes or []), traces=list(traces or []), probes=probes,
                    started_at=result.started_at or None)
