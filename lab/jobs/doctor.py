"""`lab doctor`: what each node of a target offers for distributed training, checked from inside the node.

Two things run on every node at once through the target's transport (a lab's containers, this host, real hosts):
- the provisioning probe (playbooks/files/probe.py) with --deep, with the node's own python: torch imported and
  asked what it sees (provisioning only reads torch's files); compared with what the lab gave the node (GPUs, peers);
- the pre-job checks (lab/jobs/preflight.py): /dev/shm, the interfaces gloo and NCCL would use and their MTU,
  node0's rendezvous port reached from every node, hostnames on loopback, clock offsets.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from lab.jobs.preflight import NodePreflight, run_preflight
from lab.jobs.targets import Target
from lab.nodes.gpus import run_backend
from lab.provision.ansible import PLAYBOOKS

PROBE = PLAYBOOKS / "files" / "probe.py"


@dataclass
class NodeDiagnosis:
    node: int
    hostname: str
    probe: dict
    assigned_gpus: list[str] | None  # None: the target does not say (this host, real hosts)
    problems: list[str] = field(default_factory=list)
    preflight: NodePreflight | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not (self.preflight and self.preflight.problems)

    def to_dict(self) -> dict:
        return {"node": self.node, "hostname": self.hostname, "ok": self.ok, "assigned_gpus": self.assigned_gpus,
                "problems": self.problems, **self.probe,
                "preflight": self.preflight.to_dict() if self.preflight else None}


@dataclass
class Diagnosis:
    lab: str
    nodes: list[NodeDiagnosis]
    backend: str | None  # what `lab run --backend auto` picks for one process per node; None: each node decides
    master_addr: str
    master_port: int

    @property
    def ok(self) -> bool:
        return all(node.ok for node in self.nodes)

    def to_dict(self) -> dict:
        return {"lab": self.lab, "ok": self.ok, "auto_backend": self.backend, "master_addr": self.master_addr,
                "master_port": self.master_port, "nodes": [n.to_dict() for n in self.nodes]}


def diagnose(target: Target, master_port: int | None = None, env: dict[str, str] | None = None,
             packages: tuple[str, ...] = ()) -> Diagnosis:
    """Probe every node of `target` and run the pre-job checks on `master_port` (default: a free port on node0).

    `env` is the job's extra environment, so the checks see what its processes would. `packages`: distributions
    whose versions every node must agree on, besides Python and torch (default: those the lab's spec asks for).
    """
    env = env or {}
    transport = target.transport
    port = master_port or transport.pick_port()
    script = PROBE.read_text()
    wanted = [f"--package={name}" for name in dict.fromkeys(packages or target.packages)]
    probes = [transport.start(index, [transport.python, "-c", script, "--deep", *wanted, *peer_names(target)], env)
              for index in range(target.nnodes)]
    preflight = run_preflight(transport, target.nnodes, port, env)  # while torch loads in the probes
    nodes = []
    for index, (process, hostname) in enumerate(zip(probes, target.hostnames)):
        output = list(process.lines())
        gpus = list(target.node_gpus[index]) if target.node_gpus is not None else None
        node = judge(index, hostname, output, process.wait(), gpus)
        node.preflight = preflight[index]
        nodes.append(node)
    compare_versions(nodes)
    backend = None
    if target.node_gpus is not None:
        backend = run_backend("auto", [list(gpus) for gpus in target.node_gpus], 1, target.label)
    return Diagnosis(target.label, nodes, backend, transport.master_addr, port)


def peer_names(target: Target) -> list[str]:
    """The names every node must resolve: the nodes' hostnames; on real hosts, whose inventory names are this
    machine's aliases, how they reach node0 (what provisioning checks too)."""
    if target.inventory is not None:
        return [target.transport.master_addr]
    return list(dict.fromkeys(target.hostnames))


def judge(index: int, hostname: str, output: list[str], exit_code: int | None,
          assigned_gpus: list[str] | None) -> NodeDiagnosis:
    """One node's probe output against what the target gave it (GPUs are compared only when it says)."""
    try:
        probe = json.loads(output[-1]) if output else {}
    except ValueError:
        probe = {}
    diagnosis = NodeDiagnosis(index, hostname, probe, assigned_gpus)
    if exit_code != 0 or not probe:
        tail = output[-1] if output else "no output"
        diagnosis.problems.append(f"probe failed (exit {exit_code}): {tail[:200]}")
        return diagnosis
    if probe.get("torch") is None:
        diagnosis.problems.append(f"torch missing: {probe.get('error', '')}".strip())
    unresolved = [peer for peer, address in probe.get("peers", {}).items() if address is None]
    if unresolved:
        diagnosis.problems.append(f"peers do not resolve: {', '.join(unresolved)}")
    seen = len(probe.get("gpus") or [])
    if assigned_gpus is not None and probe.get("torch") is not None and seen != len(assigned_gpus):
        build = " (a CPU-only torch build)" if assigned_gpus and probe.get("cuda_build") is None else ""
        diagnosis.problems.append(f"given {len(assigned_gpus)} GPU(s) but torch sees {seen}{build}")
    return diagnosis


def compare_versions(nodes: list[NodeDiagnosis]) -> None:
    """Name each node whose Python, torch or requested package differs from what most nodes run (or lacks it)."""
    facts = {node.node: {"python": node.probe.get("python"), "torch": node.probe.get("torch"),
                         **(node.probe.get("packages") or {})} for node in nodes if node.probe}
    names = dict.fromkeys(name for versions in facts.values() for name in versions)
    for name in names:
        seen = {index: versions.get(name) for index, versions in facts.items()}
        counts = Counter(seen.values())
        usual, _ = counts.most_common(1)[0]
        for node in nodes:
            if node.node not in seen or seen[node.node] == usual:
                continue
            others = ", ".join(f"node{index}" for index, version in seen.items() if version == usual)
            mine = f"{name} {seen[node.node]}" if seen[node.node] else f"{name} missing"
            node.problems.append(f"{mine} here, {name} {usual or 'missing'} on {others}")
        if usual is None and len(counts) == 1 and name not in ("python", "torch"):
            for node in nodes:
                node.problems.append(f"{name} is not installed (the lab's requirements ask for it)")
