"""Fault injection on a running lab: kill, stop, pause, partition, delay, heal, clear.

Partitions disconnect a node from the lab network (no privileges needed); delays use
tc netem inside the node, which needs NET_ADMIN, granted only by `lab up --net-admin`.
A fault set `--for DURATION` is reverted by a timer process of its own (lab.nodes.fault_timer),
so it ends even when the `lab` that set it is killed.
"""

from __future__ import annotations

import json
import re
import time

from lab import paths
from lab.errors import LabStateError, SpecError
from lab.model.spec import Node
from lab.nodes import fault_timer, links
from lab.nodes.driver import DockerDriver
from lab.nodes.labels import INTERFACE, container_name

ACTIONS = ("kill", "stop", "pause", "unpause", "partition", "heal", "delay", "clear")
TIMED_ACTIONS = ("kill", "stop", "pause", "partition", "delay")  # the faults `--for` can end
NO_NETEM = "Specified qdisc kind is unknown"  # tc's answer where the kernel lacks sch_netem
DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
DURATION_PATTERN = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")


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


def _fault_log(name: str):
    return paths.lab_dir(name) / "fault-log.jsonl"


def log_fault(name: str, index: int, action: str) -> None:
    """Note when a fault was set or healed by hand, so a run's timeline can show it (one JSON line each)."""
    path = _fault_log(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write(json.dumps({"at": time.time(), "node": index, "action": action}) + "\n")


def faults_between(name: str, start: float, end: float) -> list[tuple[float, int, str]]:
    """(when, node, action) of every fault set or healed on lab `name` from `start` to `end` (wall clock)."""
    path = _fault_log(name)
    events = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            event = json.loads(line)
            when, node, action = float(event["at"]), int(event["node"]), str(event["action"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a crash
        if start <= when <= end:
            events.append((when, node, action))
    return events


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


def parse_duration(text: str) -> float:
    """'30s', '2m', '1h', '500ms' or plain seconds -> seconds (more than 0)."""
    match = DURATION_PATTERN.match(text.strip())
    seconds = float(match[1]) * DURATION_UNITS[match[2] or "s"] if match else 0
    if seconds <= 0:
        raise SpecError(f"'{text}' is not a duration", "e.g. --for 30s, --for 2m, --for 1h")
    return seconds


def inject(name: str, action: str, node_text: str | None, ms: int | None = None, jitter: int | None = None,
           rate: str | None = None, duration: str | None = None, driver: DockerDriver | None = None) -> str:
    """Apply `action` to one node (every node for `clear` without one), for `duration` when given (then a timer
    reverts it); returns a one-line description of what was done."""
    seconds = parse_duration(duration) if duration is not None else None
    if seconds is not None and action not in TIMED_ACTIONS:
        raise SpecError(f"--for does not apply to {action}", f"use it with {', '.join(TIMED_ACTIONS)}")
    if node_text is None and action != "clear":
        raise SpecError(f"`lab fault {action}` needs a node", f"e.g. lab fault {action} node1")
    driver = driver or DockerDriver()
    spec = driver.existing_spec(name)
    if spec is None:
        raise LabStateError(f"no lab named '{name}' is up", "start one with `lab up --nodes 2`")
    if action == "clear":
        indices = [parse_node(node_text, spec.nodes)] if node_text is not None else list(range(spec.nodes))
        cleared = [line for index in indices if (line := clear(driver, name, index, spec.net_admin))]
        return "\n".join(cleared) or f"nothing to clear: no fault and no timer left on {_which(name, node_text)}"
    index = parse_node(node_text, spec.nodes)
    if seconds is None:
        _apply(driver, spec, name, index, action, ms, jitter, rate)
        if action != "heal":  # clear() notes a heal, with what it healed
            log_fault(name, index, action)
        return f"node{index}: {action}" + (f" {' '.join(netem_args(ms, jitter, rate))}" if action == "delay" else "")
    if action == "delay":
        netem_args(ms, jitter, rate)  # bad arguments fail before anything is armed
    # Armed first: a `lab` killed right after applying the fault still leaves the fault with its timer.
    timer = fault_timer.arm(name, index, action, seconds, driver.container(name, index).id)
    try:
        _apply(driver, spec, name, index, action, ms, jitter, rate)
    except BaseException:
        fault_timer.cancel(timer)
        raise
    log_fault(name, index, f"{action} for {duration}")
    return f"node{index}: {action} for {duration} (reverts by itself; `lab fault clear` ends it sooner)"


def _which(name: str, node_text: str | None) -> str:
    return f"node{node_text.removeprefix('node')} of lab '{name}'" if node_text is not None else f"lab '{name}'"


def _apply(driver: DockerDriver, spec, name: str, index: int, action: str, ms: int | None, jitter: int | None,
           rate: str | None) -> None:
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
        if code != 0 and NO_NETEM in output:
            raise LabStateError("this kernel has no netem (CONFIG_NET_SCH_NETEM), so `lab fault delay` cannot work here",
                                "use a host whose kernel has the sch_netem module")
        if code != 0:
            raise LabStateError(f"tc refused the delay: {output.strip()}")
        _record_delay(name, index, " ".join(args))
    elif action == "heal":
        clear(driver, name, index, spec.net_admin)
    else:
        raise SpecError(f"unknown fault '{action}'", f"use one of {', '.join(ACTIONS)}")


def clear(driver: DockerDriver, name: str, index: int, net_admin: bool) -> str:
    """Cancel the node's timers and heal every fault it has; what was cleared, '' when there was nothing."""
    timers = fault_timer.pending(name, index)
    for timer in timers:
        fault_timer.cancel(timer)
    state = next((s for s in driver.node_states(name) if s.index == index), None)
    found = (state.faults if state else []) + ([f"delay {d}"] if (d := recorded_delays(name).get(str(index))) else [])
    if found:
        _heal(driver, name, index, net_admin)
        _record_delay(name, index, None)
        log_fault(name, index, f"heal ({', '.join(found)})")
    if not found and not timers:
        return ""
    cancelled = f"{len(timers)} timer(s) cancelled" if timers else ""
    return f"node{index}: " + "; ".join(part for part in (f"healed {', '.join(found)}" if found else "", cancelled) if part)


def timed_faults(name: str) -> dict[int, list[str]]:
    """node index -> its pending timed faults with the time left, for `lab status`."""
    faults: dict[int, list[str]] = {}
    for timer in fault_timer.pending(name):
        faults.setdefault(timer.node, []).append(f"{timer.action} for {timer.seconds_left():.0f} s more")
    return faults


def revert(timer: fault_timer.Timer, driver: DockerDriver | None = None) -> None:
    """Undo the one fault a timer was set for, if the node is still the container it was set on."""
    driver = driver or DockerDriver()
    container = next((c for c in driver.containers(timer.lab) if c.id == timer.container), None)
    if container is None:
        return  # the lab was taken down or recreated since: not this timer's node any more
    status = container.status
    if timer.action in ("kill", "stop") and status not in ("running", "paused", "restarting"):
        driver.start_node(timer.lab, timer.node)
    elif timer.action == "pause" and status == "paused":
        driver.unpause_node(timer.lab, timer.node)
    elif timer.action == "partition":
        driver.reconnect_node(timer.lab, timer.node)
    elif timer.action == "delay":
        driver.exec_output(timer.lab, timer.node, ["tc", "qdisc", "del", "dev", INTERFACE, "root"])
        _record_delay(timer.lab, timer.node, None)
    log_fault(timer.lab, timer.node, f"{timer.action} ended")


def _require_running(driver: DockerDriver, name: str, index: int) -> None:
    status = driver.node_status(name, index)
    if status != "running":
        raise LabStateError(f"node{index} is {status}", "`lab fault heal` it (or `lab up`) first")


HEAL_WAIT_SECONDS = 30


def _wait_running(driver: DockerDriver, name: str, index: int) -> None:
    """A healed node is running when `lab fault heal` returns, so the next command finds it up."""
    deadline = time.monotonic() + HEAL_WAIT_SECONDS
    while (status := driver.node_status(name, index)) != "running":
        if time.monotonic() > deadline:
            raise LabStateError(f"node{index} is still {status} {HEAL_WAIT_SECONDS} s after it was started again",
                                f"see `docker logs {container_name(Node(name, index))}`")
        time.sleep(0.2)


def _heal(driver: DockerDriver, name: str, index: int, net_admin: bool) -> None:
    """Undo every fault: start, unpause, reconnect to the lab network, clear netem."""
    status = driver.node_status(name, index)
    if status == "paused":
        driver.unpause_node(name, index)
    elif status != "running":
        driver.start_node(name, index)
    _wait_running(driver, name, index)
    driver.reconnect_node(name, index)
    spec = driver.existing_spec(name)
    if spec is not None and spec.link_profile:  # a restarted or reconnected node has a new, unshaped veth
        links.shape_node(driver, name, index, spec.link_profile)
    if net_admin:
        driver.exec_output(name, index, ["tc", "qdisc", "del", "dev", INTERFACE, "root"])
