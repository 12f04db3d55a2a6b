"""`lab doctor`: what each node of a lab offers for distributed training, checked from inside the node.

Runs the provisioning probe (playbooks/files/probe.py) with --deep in every node with `docker exec`, with the
node's own python: torch imported and asked what it sees (provisioning only reads torch's files). Compares what
it finds with what the lab was given (GPUs, peers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lab import paths
from lab.nodes import lifecycle
from lab.nodes.gpus import run_backend
from lab.provision.ansible import PLAYBOOKS
from lab.jobs.transports import DockerTransport

PROBE = PLAYBOOKS / "files" / "probe.py"


@dataclass
class NodeDiagnosis:
    node: int
    hostname: str
    probe: dict
    assigned_gpus: list[str]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"node": self.node, "hostname": self.hostname, "ok": self.ok, "assigned_gpus": self.assigned_gpus,
                "problems": self.problems, **self.probe}


@dataclass
class Diagnosis:
    lab: str
    nodes: list[NodeDiagnosis]
    backend: str  # what `lab run --backend auto` picks for one process per node

    @property
    def ok(self) -> bool:
        return all(node.ok for node in self.nodes)

    def to_dict(self) -> dict:
        return {"lab": self.lab, "ok": self.ok, "auto_backend": self.backend, "nodes": [n.to_dict() for n in self.nodes]}


def diagnose(name: str) -> Diagnosis:
    """Probe every node of lab `name` at once and list what is wrong on each."""
    driver, spec, states = lifecycle.require(name)
    transport = DockerTransport(driver, name, paths.lab_dir(name) / "shared")
    peers = [state.hostname for state in states]
    script = PROBE.read_text()
    processes = {state.index: transport.start(state.index, [transport.python, "-c", script, "--deep", *peers], {}) for state in states}
    nodes = []
    for state in states:
        output = list(processes[state.index].lines())
        code = processes[state.index].wait()
        nodes.append(judge(state.index, state.hostname, output, code, state.gpus))
    return Diagnosis(name, nodes, run_backend("auto", [state.gpus for state in states], 1, name))


def judge(index: int, hostname: str, output: list[str], exit_code: int | None, assigned_gpus: list[str]) -> NodeDiagnosis:
    """One node's probe output against what the lab gave it."""
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
    if probe.get("torch") is not None and seen != len(assigned_gpus):
        build = " (a CPU-only torch build)" if assigned_gpus and probe.get("cuda_build") is None else ""
        diagnosis.problems.append(f"given {len(assigned_gpus)} GPU(s) but torch sees {seen}{build}")
    return diagnosis
