"""Start one command per node through a transport, stream their output, wait, and stop them all at a timeout.

Every run goes through `launch()`: exercise steps (runner.py) and the user's own commands (adhoc.py).
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from lab.jobs.transports import Transport, pump

POLL_SECONDS = 0.2
GRACE_SECONDS = 15


class Reporter(Protocol):
    def line(self, node: int, text: str) -> None: ...
    def event(self, text: str) -> None: ...


@dataclass
class LaunchResult:
    exit_codes: dict[int, int | None]
    logs: dict[int, str]
    timed_out: bool
    seconds: float
    oom_killed: list[int] = field(default_factory=list)


def launch(transport: Transport, commands: dict[int, tuple[list[str], dict[str, str]]], process_run_id: str,
           timeout: float, reporter: Reporter, on_timeout: Callable[[dict], None] | None = None,
           watch: Callable[[], None] | None = None, cwd: str | None = None) -> LaunchResult:
    """Start one command per node, stream their output, and wait; kill everything at the timeout.

    `watch` is called while waiting (fault injection); `on_timeout` gets the exit codes seen so far.
    A node whose stream never ends (paused container, lost engine) is given up GRACE_SECONDS later.
    """
    events: queue.Queue = queue.Queue()
    logs: dict[int, list[str]] = {index: [] for index in commands}
    exit_codes: dict[int, int | None] = {}
    oom_before = {index: transport.oom_kills(index) for index in commands}
    started = time.monotonic()
    timed_out = False
    try:
        for index, (argv, env) in commands.items():
            process = transport.start(index, argv, {**env, "LAB_RUN_ID": process_run_id}, cwd)
            pump(process, lambda text, i=index: events.put(("line", i, text)),
                 lambda code, i=index: events.put(("exit", i, code)))
        while len(exit_codes) < len(commands):
            try:
                kind, index, payload = events.get(timeout=POLL_SECONDS)
                if kind == "line":
                    logs[index].append(payload)
                    reporter.line(index, payload)
                else:
                    exit_codes[index] = payload
            except queue.Empty:
                pass
            if watch:
                watch()
            elapsed = time.monotonic() - started
            if not timed_out and elapsed > timeout:
                timed_out = True
                if on_timeout:
                    on_timeout(dict(exit_codes))
                for index in commands:
                    transport.kill(index, process_run_id, "all")
            if timed_out and elapsed > timeout + GRACE_SECONDS:
                for index in commands:
                    exit_codes.setdefault(index, None)
    except BaseException:  # Ctrl-C, a node refusing to start: nothing of this launch may outlive it, on any node
        for index in commands:
            transport.kill(index, process_run_id, "all")
        raise
    if any(code is None for code in exit_codes.values()):
        transport.check_alive()
    oom_killed = [index for index, before in oom_before.items()
                  if before is not None and (transport.oom_kills(index) or 0) > before]
    for index in oom_killed:
        reporter.event(f"node{index}: a process was killed by the kernel for exceeding the node's memory limit (OOM)")
    return LaunchResult(exit_codes, {i: "\n".join(lines) for i, lines in logs.items()}, timed_out,
                        time.monotonic() - started, oom_killed)
