"""Who owns a lab the pytest plugin made: this host, this process and when it started, kept in the lab's labels.

Several sessions (and pytest-xdist workers) run at once on one engine, beside labs that people made by hand: a
session removes only labs whose owner it can see is gone (same host, and no process with that pid and start time),
never one without an owner or owned elsewhere.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


def process_start(pid: int, proc: Path = PROC) -> str | None:
    """When process `pid` started (clock ticks since boot, /proc/PID/stat field 22); None when there is no such
    process. With the pid it names one process: a pid reused later has another start."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # after the name in (...), which may hold spaces: field 3 is [0]


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: str

    @classmethod
    def current(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), process_start(os.getpid()) or "?")

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner as its label says it; None for a label this module did not write."""
        parts = text.rsplit(":", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            return None
        return cls(parts[0], int(parts[1]), parts[2])

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}:{self.started}"

    def gone(self, proc: Path = PROC) -> bool:
        """True only when this host can tell the owner has ended: its own, and no live process is that one."""
        return self.host == socket.gethostname() and process_start(self.pid, proc) != self.started
