"""Pre-job checks for `lab doctor`: what would stop a job before it starts, found on every node at once.

Runs playbooks/files/preflight.py through the target's transport (containers, this host or real hosts alike):
`facts` on every node, then a listener on node0's rendezvous port that every node must reach, exchanging
clock readings on the way. `judge_preflight` is pure, so every rule is unit-tested from plain data.
"""

from __future__ import annotations

import ipaddress
import json
import uuid
from dataclasses import dataclass, field

from lab import paths

SCRIPT = paths.resource("playbooks") / "files" / "preflight.py"
MIN_SHM_BYTES = 256 * 1024**2  # DataLoader workers and NCCL's shared-memory transport want more than Docker's 64 MiB
MAX_CLOCK_OFFSET_MS = 500.0
REACH_SECONDS = 10


@dataclass
class NodePreflight:
    """One node's pre-job facts, how it reached node0's rendezvous port, and what is wrong with them."""

    node: int
    facts: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"node": self.node, "facts": self.facts, "reach": self.reach, "problems": self.problems,
                "warnings": self.warnings}

    def interface_text(self, key: str) -> str:
        """'eth0 (MTU 65520)' for the interface gloo ('gloo_interface') or NCCL ('nccl_interface') would use."""
        name = self.facts.get(key)
        if not name:
            return "none"
        mtu = (self.facts.get("interfaces", {}).get(name) or {}).get("mtu")
        return f"{name} (MTU {mtu})" if mtu else name

    def reach_text(self) -> str:
        """'yes (0.3 ms)', 'no', or '-' when it was not tried."""
        if self.reach.get("reached"):
            return f"yes ({self.reach['rtt_ms']:.2f} ms)"
        return "no" if self.reach.get("reached") is False or "listen_error" in self.reach else "-"

    def clock_text(self) -> str:
        offset = self.reach.get("clock_offset_ms")
        return "-" if offset is None else f"{offset:+.2f} ms"


def _last_json(lines: list[str]) -> dict:
    """The node script's JSON line; else what the node said instead (python missing, ssh refused ...)."""
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {"error": (lines[-1] if lines else "no output")[:200]}


def run_preflight(transport, nnodes: int, port: int, env: dict[str, str] | None = None) -> list[NodePreflight]:
    """Facts from every node, then every node reaches node0:`port` while node0 listens there.

    `env` is the job's extra environment (GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME change what is picked).
    """
    env = env or {}
    script = SCRIPT.read_text()

    def start(index: int, *args: str, run_id: str = ""):
        return transport.start(index, [transport.python, "-c", script, *args],
                               {**env, "LAB_RUN_ID": run_id} if run_id else env)

    started = {index: start(index, "facts") for index in range(nnodes)}
    nodes = [NodePreflight(index, _last_json(list(process.lines()))) for index, process in started.items()]
    for process in started.values():
        process.wait()
    run_id = f"doctor-{uuid.uuid4().hex[:8]}"
    listener = start(0, "listen", str(port), str(nnodes), str(REACH_SECONDS + 5), run_id=run_id)
    listener_lines = listener.lines()
    listening = _last_json([next(listener_lines, "")])
    try:
        if listening.get("listening"):
            clients = {index: start(index, "connect", transport.master_addr, str(port), str(REACH_SECONDS))
                       for index in range(nnodes)}
            for index, process in clients.items():
                nodes[index].reach = _last_json(list(process.lines()))
                process.wait()
        else:
            nodes[0].reach = {"reached": None, "listen_error": listening.get("error", "no answer")}
            for node in nodes[1:]:
                node.reach = {"reached": None, "error": f"not tried: node0 could not listen on port {port}"}
    finally:
        if not all(node.reach.get("reached") for node in nodes):  # it would wait for a client that never comes
            transport.kill(0, run_id)
        list(listener_lines)
        listener.wait()
    return judge_preflight(nodes, transport.master_addr, port)


def is_loopback(address: str) -> bool:
    """Whether the rendezvous is on this host's loopback: then every node is a process on one host."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == "localhost"


def judge_preflight(nodes: list[NodePreflight], master_addr: str, port: int) -> list[NodePreflight]:
    """Fill each node's problems (a job would fail) and warnings (a job would be slow or fragile)."""
    one_host = is_loopback(master_addr)  # loopback then reaches every node: a loopback hostname is fine
    mtus = {}
    for node in nodes:
        facts, name = node.facts, f"node{node.node}"
        if "hostname" not in facts:
            node.problems.append(f"pre-job checks could not run on {name}: {facts.get('error', 'no answer')}")
            continue
        node.problems += _interface_problems(facts, name, one_host)
        node.warnings += _interface_warnings(facts, name, one_host)
        shm = facts.get("shm_bytes")
        if shm is not None and shm < MIN_SHM_BYTES:
            node.warnings.append(f"/dev/shm on {name} is {shm // 1024**2} MiB: DataLoader workers and NCCL's "
                                 f"shared-memory transport want at least {MIN_SHM_BYTES // 1024**2} MiB "
                                 "(docker run --shm-size)")
        gloo = (facts.get("interfaces") or {}).get(facts.get("gloo_interface")) or {}
        if gloo.get("mtu") and facts.get("gloo_interface") not in _loopback_interfaces(facts):
            mtus[node.node] = gloo["mtu"]  # the MTU of the path between nodes (loopback carries none of it)
        node.problems += _reach_problems(node.reach, name, master_addr, port)
        offset = node.reach.get("clock_offset_ms")
        if offset is not None and abs(offset) > MAX_CLOCK_OFFSET_MS:
            node.warnings.append(f"{name}'s clock is {offset:+.0f} ms off node0's: timeouts and log times disagree; "
                                 "sync clocks (chrony/NTP)")
    if len(set(mtus.values())) > 1:
        spread = ", ".join(f"node{index}: {value}" for index, value in sorted(mtus.items()))
        for node in nodes:
            node.warnings.append(f"MTU differs between nodes ({spread}): large messages fragment or stall")
    return nodes


def _loopback_interfaces(facts: dict) -> set[str]:
    return {interface for interface, info in (facts.get("interfaces") or {}).items()
            if any(is_loopback(address) for address in info.get("addresses", []))}


def _interface_problems(facts: dict, name: str, one_host: bool) -> list[str]:
    """The hostname gloo advertises, and the interfaces that GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name."""
    problems = []
    interfaces = facts.get("interfaces") or {}
    hostname, addresses = facts.get("hostname"), ", ".join(facts.get("hostname_addresses") or [])
    gloo_wanted = (facts.get("socket_ifname") or {}).get("GLOO_SOCKET_IFNAME")
    if one_host:
        pass  # loopback reaches every node
    elif facts.get("hostname_is_loopback"):
        problems.append(f"{name}'s own hostname {hostname} resolves to a loopback address ({addresses}): gloo and "
                        "torchrun would advertise it and peers could not connect; map the hostname to the node's "
                        "network address in /etc/hosts")
    elif facts.get("gloo_reason") == "loopback fallback":
        problems.append(f"{name}'s own hostname {hostname} resolves to no address of {name} "
                        f"({addresses or 'nothing'}): gloo falls back to loopback and peers could not connect; "
                        "add it to /etc/hosts or set GLOO_SOCKET_IFNAME")
    elif facts.get("gloo_interface") in _loopback_interfaces(facts):
        problems.append(f"GLOO_SOCKET_IFNAME={gloo_wanted} on {name} is loopback: peers could not connect")
    missing = [part for part in (gloo_wanted or "").split(",") if part and part not in interfaces]
    if missing:
        problems.append(f"GLOO_SOCKET_IFNAME={gloo_wanted} on {name}, which has no interface {', '.join(missing)} "
                        f"with an address (it has {', '.join(interfaces) or 'none'})")
    nccl_wanted = (facts.get("socket_ifname") or {}).get("NCCL_SOCKET_IFNAME")
    if nccl_wanted and not facts.get("nccl_interface"):
        problems.append(f"NCCL_SOCKET_IFNAME={nccl_wanted} on {name} matches none of its interfaces "
                        f"({', '.join(interfaces) or 'none'}): NCCL would find no socket interface")
    return problems


def _interface_warnings(facts: dict, name: str, one_host: bool) -> list[str]:
    """NCCL on loopback when the nodes are separate hosts (a warning: only jobs that use nccl fail)."""
    if one_host or facts.get("nccl_interface") not in _loopback_interfaces(facts):
        return []
    return [f"NCCL would use {facts['nccl_interface']} on {name}: an nccl job could not reach the other nodes; "
            "set NCCL_SOCKET_IFNAME to the interface that reaches them"]


def _reach_problems(reach: dict, name: str, master_addr: str, port: int) -> list[str]:
    if "listen_error" in reach:
        return [f"{name} cannot listen on the rendezvous port {port}: {reach['listen_error']}; a job on this port "
                "would fail (another process holds it: choose another --master-port, or leave it out for a free one)"]
    if reach.get("reached") is False:
        return [f"{name} cannot reach the rendezvous {master_addr}:{port}: {reach.get('error', 'no answer')}"]
    return []
