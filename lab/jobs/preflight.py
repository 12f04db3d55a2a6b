"""Pre-job checks for `lab doctor`: what would stop a job before it starts, found on every node at once.

Runs playbooks/files/preflight.py through the target's transport (containers, this host or real hosts alike):
`facts` on every node, then a listener on node0's rendezvous port that every node must reach, exchanging
clock readings on the way. `judge_preflight` is pure, so every rule is unit-tested from plain data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from lab import paths

SCRIPT = paths.resource("playbooks") / "files" / "preflight.py"
MIN_SHM_BYTES = 256 * 1024**2  # DataLoader workers and NCCL's shared-memory transport want more than Docker's 64 MiB
MAX_CLOCK_OFFSET_MS = 500.0
REACH_SECONDS = 10


@dataclass
class NodePreflight:
    """One node's pre-job facts and what is wrong with them."""

    node: int
    facts: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"node": self.node, "facts": self.facts, "reach": self.reach, "problems": self.problems,
                "warnings": self.warnings}

    def interface_text(self, key: str) -> str:
        """'eth0 (MTU 65520)' for the interface gloo or NCCL would use here."""
        name = self.facts.get(key)
        if not name:
            return "none"
        mtu = (self.facts.get("interfaces", {}).get(name) or {}).get("mtu")
        return f"{name} (MTU {mtu})" if mtu else name


def _last_json(lines: list[str]) -> dict:
    for line in reversed(lines):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {"error": (lines[-1] if lines else "no output")[:200]}


def run_preflight(transport, nnodes: int, port: int) -> list[NodePreflight]:
    """Facts from every node, then every node reaches node0:`port` while node0 listens there."""
    script = SCRIPT.read_text()
    started = {index: transport.start(index, [transport.python, "-c", script, "facts"], {}) for index in range(nnodes)}
    nodes = [NodePreflight(index, _last_json(list(process.lines()))) for index, process in started.items()]
    for process in started.values():
        process.wait()
    listener = transport.start(0, [transport.python, "-c", script, "listen", str(port), str(nnodes),
                                   str(REACH_SECONDS + 5)], {})
    listener_lines = listener.lines()
    first = next(listener_lines, "")
    listening = _last_json([first])
    if not listening.get("listening"):
        for node in nodes:
            node.reach = {"reached": False, "error": f"node0 cannot listen on port {port}: "
                                                     f"{listening.get('error', 'no answer')}"}
    else:
        clients = {index: transport.start(index, [transport.python, "-c", script, "connect", transport.master_addr,
                                                  str(port), str(REACH_SECONDS)], {}) for index in range(nnodes)}
        for index, process in clients.items():
            nodes[index].reach = _last_json(list(process.lines()))
            process.wait()
    list(listener_lines)
    listener.wait()
    return judge_preflight(nodes, transport.master_addr, port)


def judge_preflight(nodes: list[NodePreflight], master_addr: str, port: int) -> list[NodePreflight]:
    """Fill each node's problems (a job would fail) and warnings (a job would be slow or fragile)."""
    mtus = {}
    for node in nodes:
        facts, name = node.facts, f"node{node.node}"
        if "error" in facts and "hostname" not in facts:
            node.problems.append(f"pre-job checks could not run: {facts['error']}")
            continue
        if facts.get("hostname_is_loopback"):
            node.problems.append(
                f"{name}'s own hostname {facts.get('hostname')} resolves to a loopback address "
                f"({', '.join(facts.get('hostname_addresses', []))}): gloo would advertise it and peers could not "
                "connect; map the hostname to the node's network address in /etc/hosts")
        elif not facts.get("hostname_addresses"):
            node.problems.append(f"{name}'s own hostname {facts.get('hostname')} does not resolve: gloo cannot "
                                 "pick an interface; add it to /etc/hosts or set GLOO_SOCKET_IFNAME")
        interfaces = facts.get("interfaces") or {}
        for variable, wanted in (facts.get("socket_ifname") or {}).items():
            missing = [part for part in wanted.lstrip("^").split(",")
                       if part and not wanted.startswith("^") and not any(i.startswith(part.lstrip("=")) for i in interfaces)]
            if missing:
                node.problems.append(f"{variable}={wanted} on {name}, which has no interface {', '.join(missing)} "
                                     f"(it has {', '.join(sorted(interfaces)) or 'none'})")
        if not facts.get("gloo_interface"):
            node.problems.append(f"gloo would find no interface on {name}")
        shm = facts.get("shm_bytes")
        if shm is not None and shm < MIN_SHM_BYTES:
            node.warnings.append(f"/dev/shm on {name} is {shm // 1024**2} MiB: DataLoader workers and NCCL's "
                                 f"shared-memory transport want at least {MIN_SHM_BYTES // 1024**2} MiB")
        gloo = facts.get("gloo_interface")
        if gloo in interfaces and interfaces[gloo].get("mtu"):
            mtus[node.node] = interfaces[gloo]["mtu"]
        reach = node.reach
        if reach and not reach.get("reached"):
            node.problems.append(f"{name} cannot reach the rendezvous {master_addr}:{port}: "
                                 f"{reach.get('error', 'no answer')}")
        offset = reach.get("clock_offset_ms") if reach else None
        if offset is not None and abs(offset) > MAX_CLOCK_OFFSET_MS:
            node.warnings.append(f"{name}'s clock is {offset:+.0f} ms off node0's: timeouts and log times disagree; "
                                 "sync clocks (chrony/NTP)")
    if len(set(mtus.values())) > 1:
        spread = ", ".join(f"node{index}: {value}" for index, value in sorted(mtus.items()))
        for node in nodes:
            node.warnings.append(f"MTU differs between nodes ({spread}): large messages fragment or stall")
    return nodes
