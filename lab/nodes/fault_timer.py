"""The timer of a fault that ends by itself (`lab fault ACTION NODE --for DURATION`).

It is a process of its own on the host, `python -m lab.nodes.fault_timer ...`, started in a session of its own,
so it outlives the `lab` that set it whether that exits, gets Ctrl-C or is killed. Its state file
(`.lab/labs/LAB/timers/node<I>-<ACTION>.json`) names its pid, the fault and its end: `lab status` shows the time
left from it and `lab fault clear` ends it. The timer reverts the fault only while its file still names it and
the node is still the container the fault was set on, so after `lab down` (which removes the file) or a
recreated lab it exits without touching anything.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import paths
from lab.errors import LabStateError

MODULE = "lab.nodes.fault_timer"
POLL_SECONDS = 1.0  # how soon a timer notices its file is gone (`lab down`, `lab fault clear`)
ARM_SECONDS = 30  # how long `lab fault` waits for a new timer to say it is armed


@dataclass(frozen=True)
class Timer:
    """One pending timed fault, as its state file holds it."""

    lab: str
    node: int
    action: str
    until: float  # seconds since the epoch
    container: str  # the node's container id when the fault was set
    pid: int

    def seconds_left(self) -> float:
        return max(0.0, self.until - time.time())


def timers_dir(lab: str) -> Path:
    return paths.lab_dir(lab) / "timers"


def state_file(lab: str, node: int, action: str) -> Path:
    return timers_dir(lab) / f"node{node}-{action}.json"


def read(path: Path) -> Timer | None:
    """The timer a state file names; None when the file is gone or unreadable (a half-written or broken file
    arms nothing, so it is treated as no timer)."""
    try:
        return Timer(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def pending(lab: str, node: int | None = None) -> list[Timer]:
    """The lab's live timers (one node's, or all), in node and action order; the file of a timer that died
    without reverting (killed, host rebooted) is removed."""
    found = []
    for path in sorted(timers_dir(lab).glob("node*-*.json")):
        timer = read(path)
        if timer and not _is_timer_process(timer.pid):
            path.unlink(missing_ok=True)
        elif timer and (node is None or timer.node == node):
            found.append(timer)
    return found


def _write(timer: Timer) -> None:
    path = state_file(timer.lab, timer.node, timer.action)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps(asdict(timer)))
    os.replace(scratch, path)  # readers see the old file or the new one, never half of one


def _is_timer_process(pid: int) -> bool:
    """True when pid is alive and (where /proc tells) a fault timer, so a reused pid is never signalled."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not cmdline.parent.parent.is_dir():
        return True
    try:
        return MODULE.encode() in cmdline.read_bytes()
    except OSError:
        return False


def cancel(timer: Timer) -> None:
    """End a pending timer and remove its file; nothing happens to the fault itself."""
    path = state_file(timer.lab, timer.node, timer.action)
    if read(path) == timer:
        path.unlink(missing_ok=True)
    if timer.pid != os.getpid() and _is_timer_process(timer.pid):
        try:
            os.kill(timer.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def arm(lab: str, node: int, action: str, seconds: float, container: str) -> Timer:
    """Start the timer process for a fault, replacing an earlier timer of the same fault; returns once it is armed."""
    earlier = read(state_file(lab, node, action))
    if earlier:
        cancel(earlier)
    until = time.time() + seconds
    command = [sys.executable, "-m", MODULE, lab, str(node), action, repr(until), container]
    log = _log_file()
    with log.open("a") as errors:  # a timer that fails leaves its traceback there
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                   text=True, start_new_session=True, close_fds=True,
                                   env={**os.environ, "LAB_HOME": str(paths.state_dir())})
    try:
        with process.stdout:  # the timer writes its file before it says it is armed
            ready, _, _ = select.select([process.stdout], [], [], ARM_SECONDS)
            armed = bool(ready) and process.stdout.readline().startswith("armed")
        timer = read(state_file(lab, node, action))
        if not armed or timer is None or timer.pid != process.pid:
            raise LabStateError(f"the timer of node{node}'s {action} did not start", f"see {log}")
    except BaseException:
        process.kill()
        raise
    return timer


def _log_file() -> Path:
    path = paths.logs_dir() / "fault-timers.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _log(message: str) -> None:
    with _log_file().open("a") as log:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")


def _run(lab: str, node: int, action: str, until: float, container: str) -> None:
    """Write the state file, say 'armed', sleep to the end unless cancelled, then revert the fault."""
    timer = Timer(lab, node, action, until, container, os.getpid())
    path = state_file(lab, node, action)
    _write(timer)
    try:
        print("armed", flush=True)
    except OSError:  # the `lab` that started this is gone already: the timer runs on all the same
        pass
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # let go of the pipe to `lab`
    while time.time() < until:
        time.sleep(min(POLL_SECONDS, max(0.0, until - time.time())))
        if read(path) != timer:
            return  # cancelled, replaced, or the lab was taken down
    try:
        from lab.nodes.faults import revert

        revert(timer)
        _log(f"lab '{lab}' node{node}: {action} reverted")
    except Exception:  # noqa: BLE001 - nobody is left to tell but the log
        _log(f"lab '{lab}' node{node}: could not revert {action}:\n{traceback.format_exc()}")
    finally:
        if read(path) == timer:
            path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description="Revert a lab fault at a given time.")
    parser.add_argument("lab")
    parser.add_argument("node", type=int)
    parser.add_argument("action")
    parser.add_argument("until", type=float, help="seconds since the epoch")
    parser.add_argument("container", help="the node's container id when the fault was set")
    args = parser.parse_args()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # a closing terminal does not end the timer
    _run(args.lab, args.node, args.action, args.until, args.container)


if __name__ == "__main__":
    main()
