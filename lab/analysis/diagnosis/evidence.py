"""What the runner knows after a run: each node's exit, log and environment, the launch facts, the
lab's faults and the stacks it took.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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


def evidence_from_launch(result: LaunchOutcome, *, nnodes: int, nproc_per_node: int = 1, backend: str = "auto",
                         master_addr: str | None = None, master_port: int | None = None,
                         hostnames: dict[int, str] | None = None, interfaces: dict[int, list[str]] | None = None,
                         gpus: dict[int, int] | None = None, memory_limit: str | None = None,
                         faults: Iterable[tuple[int, str]] = (), env: dict[str, str] | None = None,
                         command: list[str] | None = None, stopped: str = "",
                         processes: list[ProcessStack] | None = None, traces: list[RankTrace] | None = None) -> Evidence:
    """Evidence from a launch result plus what the runner knows of the lab.

    `hostnames`/`interfaces`/`gpus` are per node index (missing: 'node<i>', unknown, 0);
    `faults` are the (node, action) pairs the lab injected during the run.
    """
    hostnames, interfaces, gpus = hostnames or {}, interfaces or {}, gpus or {}
    nodes = [NodeEvidence(index=index, hostname=hostnames.get(index, f"node{index}"),
                          exit_code=result.exit_codes.get(index), oom_killed=index in result.oom_killed,
                          lines=result.logs.get(index, "").splitlines(), interfaces=list(interfaces.get(index, [])),
                          gpus=gpus.get(index, 0), memory_limit=memory_limit,
                          exited_at=result.node_exits.get(index))
             for index in sorted(set(result.exit_codes) | set(result.logs))]
    return Evidence(nodes=nodes, nnodes=nnodes, nproc_per_node=nproc_per_node, backend=backend,
                    master_addr=master_addr, master_port=master_port, env=dict(env or {}), command=list(command or []),
                    faults=[Fault(int(node), action) for node, action in faults], timed_out=result.timed_out,
                    stopped=stopped, processes=list(processes or []), traces=list(traces or []))
