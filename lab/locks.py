"""Locks held by a running command: `fcntl.flock` on a file, so the kernel releases them when the process dies.

No lock outlives its holder (a crash, `kill -9`, a lost terminal), so there is nothing stale to clean up; the
file itself stays and says who took it last, for the message of whoever finds it taken.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import sys
from pathlib import Path


class HeldLock:
    """An exclusive flock on `path`, held by this process until `release()` (or its end)."""

    def __init__(self, path: Path, handle):
        self.path = path
        self.handle = handle

    def release(self) -> None:
        self.handle.close()  # closing the only descriptor drops the flock


def try_lock(path: Path) -> HeldLock | None:
    """Take the exclusive lock on `path` without waiting and record this process in it; None when another holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.truncate(0)
    handle.write(json.dumps({"pid": os.getpid(), "command": this_command()}) + "\n")
    handle.flush()
    return HeldLock(path, handle)


def wait_lock(path: Path) -> HeldLock:
    """Take the exclusive lock on `path`, waiting for whoever holds it (work that must happen once: an image)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = open(path, "a+")
    fcntl.flock(handle, fcntl.LOCK_EX)
    handle.truncate(0)
    handle.write(json.dumps({"pid": os.getpid(), "command": this_command()}) + "\n")
    handle.flush()
    return HeldLock(path, handle)


def holder(path: Path) -> str:
    """Who holds the lock on `path`, as its holder recorded it: 'pid 123 (`lab up --nodes 2`)'."""
    try:
        record = json.loads(path.read_text())
        return f"pid {int(record['pid'])} (`{record['command']}`)"
    except (OSError, ValueError, TypeError, KeyError):  # taken a moment ago: the holder is still writing its name
        return "another process"


def this_command() -> str:
    """This process's command line as its user typed it: `lab ...` for the lab command however it was started."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program in ("lab", "__main__.py"):
        program = "lab"
    return shlex.join([program, *sys.argv[1:]])
