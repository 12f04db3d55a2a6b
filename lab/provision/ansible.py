"""The ansible driver: write an inventory for the lab's nodes and run playbooks/provision.yml.

The playbook knows nothing of Docker; the same function provisions real hosts when given
their inventory instead of the lab's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from lab import paths
from lab.errors import ProvisionError
from lab.model.spec import DEFAULT_NPROC_PER_NODE, MASTER_PORT, MAX_NODES, LabSpec

PLAYBOOKS = paths.resource("playbooks")
PROBE_TASK = "Write /etc/lab/env and probe python, torch, GPUs and peers"  # its output is the node's report
NODE_PYTHON = "/opt/lab-venv/bin/python"
# Loopback: no compression (ansible's default -C costs CPU for nothing); one SSH connection per node, reused.
LAB_SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s"
# The one host key type a lab's nodes make (docker/Dockerfile, the host and user images' entrypoints) and pin.
PINNED_HOST_KEY_TYPE = "ssh-ed25519"


@dataclass
class NodeReport:
    host: str
    ok: bool
    facts: dict = field(default_factory=dict)
    error: str = ""

    def summary(self) -> str:
        if not self.ok:
            return f"{self.host}: FAILED {self.error}"
        probe = self.facts.get("probe", {})
        gpus = probe.get("gpus") or []
        unresolved = probe.get("unresolved") or []
        return (f"{self.host}: python {probe.get('python')}, torch {probe.get('torch')}, "
                f"backends {'/'.join(probe.get('backends', []))}, "
                f"{len(gpus)} GPU(s){' (' + ', '.join(gpus) + ')' if gpus else ''}, "
                f"peers {'all resolve' if not unresolved else 'unresolved: ' + ', '.join(unresolved)}")


@dataclass
class ProvisionResult:
    nodes: list[NodeReport]
    log: Path
    seconds: float

    @property
    def ok(self) -> bool:
        return bool(self.nodes) and all(node.ok for node in self.nodes)


def write_inventory(spec: LabSpec, ssh_ports: dict[int, int], key: Path, known_hosts: Path, path: Path,
                    python: str = NODE_PYTHON, interpreter: str = "/usr/bin/python3") -> Path:
    """An INI inventory addressing each node through its loopback SSH port, accepting only the host keys pinned in
    `known_hosts` (ansible's own host_key_checking on: off, it would put StrictHostKeyChecking=no first)."""
    lines = ["[lab]"]
    for index, port in sorted(ssh_ports.items()):
        lines.append(f"node{index} ansible_host=127.0.0.1 ansible_port={port} node_rank={index}")
    peers = ",".join(f"'node{index}'" for index in sorted(ssh_ports))
    lines += [
        "",
        "[lab_ssh_ready:children]",  # the lab waited for every sshd's banner: provision.yml need not wait again
        "lab",
        "",
        "[lab:vars]",
        "ansible_user=root",
        f"ansible_ssh_private_key_file={key}",
        f"ansible_ssh_args='{LAB_SSH_ARGS}'",
        "ansible_host_key_checking=true",
        f"ansible_ssh_common_args='-o StrictHostKeyChecking=yes -o UserKnownHostsFile={known_hosts} "
        f"-o HostKeyAlgorithms={PINNED_HOST_KEY_TYPE} -o LogLevel=ERROR'",
        f"ansible_python_interpreter={interpreter}",
        f"lab_python={python}",
        f"nnodes={spec.nodes}",
        f"nproc_per_node={spec.nproc_per_node or 1}",
        f"master_addr={spec.master_addr}",
        f"master_port={MASTER_PORT}",
        f"lab_peers=[{peers}]",
        f"lab_hosts=[{peers}]",
        f"hostfile_slots={spec.nproc_per_node or DEFAULT_NPROC_PER_NODE}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@contextlib.contextmanager
def interrupts_cancel() -> Iterator[Callable[[], bool]]:
    """Ctrl-C during a playbook cancels it (ansible-runner stops ansible-playbook), then interrupts `lab`.

    Left to itself, ansible-runner installs its own SIGINT handler and never restores it: a Ctrl-C would
    only cancel the playbook, and `lab up` would carry on as if nothing happened (measured in bench/trials.py).
    """
    interrupted = threading.Event()
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, lambda *_: interrupted.set()) if in_main else None
    try:
        yield interrupted.is_set
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if interrupted.is_set():
        raise KeyboardInterrupt


def run_playbook(lab_name: str, inventory: Path, playbook: str = "provision.yml") -> ProvisionResult:
    """Run a playbook with ansible-runner; keep the full log under .lab/logs/<lab>/."""
    import ansible_runner

    started = time.monotonic()
    private = paths.lab_dir(lab_name) / "ansible"
    shutil.rmtree(private, ignore_errors=True)
    private.mkdir(parents=True)
    # ansible-runner starts ansible-playbook from PATH; the venv's bin is not on it unless activated.
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    with interrupts_cancel() as cancelled:
        runner = ansible_runner.run(
            private_data_dir=str(private), cancel_callback=cancelled,
            project_dir=str(PLAYBOOKS),
            playbook=str(PLAYBOOKS / playbook),
            inventory=str(inventory),
            quiet=True,
            envvars={"ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "False",
                     "ANSIBLE_PIPELINING": "True", "ANSIBLE_FORKS": str(MAX_NODES),  # ansible uses min(forks, hosts)
                     # The controller polls its workers every 1 ms by default: CPU the forks need (at 32 nodes on two
                     # cores, 0.05 s took 0.3 CPU-s and ~0.8 s off a 6.5 s provisioning, bench/RESULTS.md).
                     "ANSIBLE_INTERNAL_POLL_INTERVAL": "0.05",
                     "ANSIBLE_HOST_PATTERN_MISMATCH": "ignore"},  # real hosts' inventories have no lab_ssh_ready group
        )
    log_dir = paths.logs_dir() / lab_name
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"provision-{time.strftime('%Y%m%d-%H%M%S')}.log"
    log.write_text(runner.stdout.read() if runner.stdout else "")
    reports = node_reports(runner.events)
    result = ProvisionResult(reports, log, time.monotonic() - started)
    if runner.status == "failed" and not reports:
        raise ProvisionError(f"ansible failed before reaching any node (status {runner.rc})", f"see {log}")
    return result


def node_reports(events) -> list[NodeReport]:
    """One report per host from ansible-runner's events: the probe's facts, or where and why the host failed."""
    reports: dict[str, NodeReport] = {}
    for event in events:
        data = event.get("event_data", {})
        host, kind, result = data.get("host"), event.get("event"), data.get("res", {})
        if not host or data.get("ignore_errors"):
            continue
        probe = probe_report(result) if data.get("task") == PROBE_TASK else None
        facts = {"probe": probe} if probe else {}
        if kind == "runner_on_ok" and probe:
            reports[host] = NodeReport(host, True, facts)
        elif kind in ("runner_on_failed", "runner_on_unreachable"):
            reports[host] = NodeReport(host, False, facts, f"at '{data.get('task')}': {failure(result, probe)[:200]}")
    return sorted(reports.values(), key=lambda report: report.host)


def probe_report(result: dict) -> dict | None:
    """The probe's JSON line: the last line of the task's output (raw runs on a tty, so more can come first)."""
    lines = result.get("stdout_lines") or [""]
    try:
        report = json.loads(lines[-1])
    except ValueError:
        return None
    return report if isinstance(report, dict) else None


def failure(result: dict, probe: dict | None) -> str:
    """Why a node failed, in one line: what the probe found wrong, else ansible's own words."""
    if probe and result.get("rc") == 0:
        if probe.get("torch") is None:
            return f"torch missing under {probe.get('executable')}: {probe.get('error', '')}"
        if probe.get("unresolved"):
            return f"peers do not resolve: {', '.join(probe['unresolved'])}"
    # raw runs on a tty: a failing command's own words are in stdout, ansible's ("non-zero return code") in msg.
    for text in (result.get("stderr"), result.get("rc") and result.get("stdout"), result.get("msg")):
        lines = str(text or "").strip().splitlines()
        if lines:
            return lines[-1].strip()
    return "failed"
