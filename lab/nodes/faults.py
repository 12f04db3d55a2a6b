"""Fault injection on a running lab: kill, stop, pause, partition, delay, heal.

Partitions disconnect a node from the lab network (no privileges needed); delays use
tc netem inside the node, which needs NET_ADMIN, granted only by `lab up --net-admin`.
"""

from __future__ import annotations

import json

from lab import paths
from lab.errors import LabStateError, SpecError
from lab.nodes.driver import DockerDriver

ACTIONS = ("kill", "stop", "pause", "unpause", "partition", "heal", "delay")
INTERFACE = "eth0"


def _delays_file(name: str):
    return paths.lab_dir(name) / "faults.json"


def recorded_delays(name: str) -> dict[str, str]:
    """node index -> netem description, as last set by `lab fault delay`."""
    path = _delays_file(name)
    if not path.exists():
        return {}
    try:
        delays = json.loads(path.read_text())
    except ValueError:
        delays = None
    if not isinstance(delays, dict):
        raise LabStateError(f"state file {path} is corrupted", "delete it and run `lab fault heal NODE` on delayed nodes")
    return delays


def _record_delay(name: str, index: int, description: str | None) -> None:
    delays = recorded_delays(name)
    if description:
        delays[str(index)] = description
    else:
        delays.pop(str(index), None)
    path = _delays_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(delays))


def parse_node(text: str, nodes: int) -> int:
    """'node1' or '1' -> 1, within the lab's node count."""
    raw = text.removeprefix("node")
    if not raw.isdigit() or int(raw) >= nodes:
        raise SpecError(f"no node '{text}' in this lab", f"use node0..node{nodes - 1}")
    return int(raw)


def netem_args(ms: int | None, jitter: int | None, rate: str | None) -> list[str]:
    if ms is None and rate is None:
        raise SpecError("delay needs --ms and/or --rate", "e.g. lab fault delay node1 --ms 50 --jitter 10")
    if jitter and ms is None:
        raise SpecError("--jitter needs --ms")
    args = []
    if ms is not None:
        args += ["delay", f"{ms}ms"] + ([f"{jitter}ms"] if jitter else [])
    if rate is not None:
        args += ["rate", rate]
    return args


def inject(name: str, action: str, node_text: str, ms: int | None = None, jitter: int | None = None,
           rate: str | None = None, driver: DockerDriver | None = None) -> str:
    """Apply `action` to one node; returns a one-line description of what was done."""
    driver = driver or DockerDriver()
    spec = driver.existing_spec(name)
    if spec is None:
        raise LabStateError(f"no lab named '{name}' is up", "start one with `lab up --nodes 2`")
    index = parse_node(node_text, spec.nodes)
    if action == "kill":
        _require_running(driver, name, index)
        driver.kill_node(name, index)
    elif action == "stop":
        driver.stop_node(name, index)
    elif action == "pause":
        _require_running(driver, name, index)
        driver.pause_node(name, index)
    elif action == "unpause":
        if driver.node_status(name, index) == "paused":
            driver.unpause_node(name, index)
    elif action == "partition":
        _require_running(driver, name, index)
        driver.disconnect_node(name, index)
    elif action == "delay":
        _require_running(driver, name, index)
        if not spec.net_admin:
            raise LabStateError("delays need NET_ADMIN, which this lab was not given",
                                "recreate it with `lab up --recreate --net-admin ...`")
        args = netem_args(ms, jitter, rate)
        code, output = driver.exec_output(name, index, ["tc", "qdisc", "replace", "dev", INTERFACE, "root", "netem", *args])
        if code != 0:
            raise LabStateError(f"tc refused the delay: {output.strip()}")
        _record_delay(name, index, " ".join(args))
    elif action == "heal":
        _heal(driver, name, index, spec.net_admin)
        _record_delay(name, index, None)
    else:
        raise SpecError(f"unknown fault '{action}'", f"use one of {', '.join(ACTIONS)}")
    return f"node{index}: {action}" + (f" {' '.join(netem_args(ms, jitter, rate))}" if action == "delay" else "")


def _require_running(driver: DockerDriver, name: str, index: int) -> None:
    status = driver.node_status(name, index)
    if status != "running":
        raise LabStateError(f"node{index} is {status}", "`lab fault heal` it (or `lab up`) first")


def _heal(driver: DockerDriver, name: str, index: int, net_admin: bool) -> None:
    """Undo every fault: start, unpause, reconnect to the lab network, clear netem."""
    status = driver.node_status(name, index)
    if status == "paused":
        driver.unpause_node(name, index)
    elif status != "running":
        driver.start_node(name, index)
    driver.reconnect_node(name, index)
    if net_admin:
        driver.exec_output(name, index, ["tc", "qdisc", "del", "dev", INTERFACE, "root"])
