"""How many run records stay: a bound (count, age, total size), runs pinned with `lab runs --keep`, and pruning.

Every record is a folder under `.lab/runs/` whose name starts with its UTC start time, so the oldest sort first.
`choose_removals` is the pure rule: drop the oldest runs until the rest fit the bound, never a pinned run nor one in
progress. A run in progress holds an flock on its folder's `.recording` while `lab` records it (lab/locks.py:
the kernel drops it if `lab` dies, so a crashed run is not protected forever). The bound applies after every run is
recorded (lab/analysis/record.py `recording`) and by `lab runs --prune`; this module reads no run.json.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from lab import paths
from lab.errors import SpecError
from lab.locks import HeldLock, try_lock

KEEP_MARKER = "keep"  # a file in a run's folder: `lab runs --keep RUN` pins it
RECORDING_LOCK = ".recording"  # held while the run is being recorded
# The default bound, and the environment variables that change it ("off" lifts one).
DEFAULT_MAX_COUNT = 500
DEFAULT_MAX_SIZE = 1024**3
DEFAULT_MAX_AGE = None
COUNT_VARIABLE, SIZE_VARIABLE, AGE_VARIABLE = "LAB_RUNS_MAX_COUNT", "LAB_RUNS_MAX_SIZE", "LAB_RUNS_MAX_AGE"
OFF = ("off", "none", "")
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
              "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}
AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
STAMP = re.compile(r"^(\d{8}-\d{6}-\d{3})")


@dataclass(frozen=True)
class Bound:
    """At most `max_count` runs, `max_size` bytes in all, none older than `max_age` seconds; None: no limit."""

    max_count: int | None = DEFAULT_MAX_COUNT
    max_size: int | None = DEFAULT_MAX_SIZE
    max_age: float | None = DEFAULT_MAX_AGE

    def describe(self) -> str:
        parts = [f"{self.max_count} runs" if self.max_count is not None else None,
                 human_size(self.max_size) if self.max_size is not None else None,
                 f"{human_age(self.max_age)} old" if self.max_age is not None else None]
        return ", ".join(part for part in parts if part) or "none"


@dataclass(frozen=True)
class StoredRun:
    """What the bound needs to know of one record folder."""

    run_id: str
    started: float  # seconds since the epoch, from the id (the folder's time when the id has none)
    size: int  # bytes of every file in the folder
    kept: bool
    in_progress: bool
    path: Path


def parse_size(text: str, what: str) -> int:
    """'500M', '2G', '1GiB', '0' -> bytes; a one-line error with a hint otherwise."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not found or found.group(2).lower() not in SIZE_UNITS:
        raise SpecError(f"{what}: '{text}' is not a size", "give bytes with a unit: 500M, 2G, 1GiB")
    return int(float(found.group(1)) * SIZE_UNITS[found.group(2).lower()])


def parse_age(text: str, what: str) -> float:
    """'30d', '12h', '90m', '2w' -> seconds; a one-line error with a hint otherwise."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*", text)
    if not found or found.group(2).lower() not in AGE_UNITS:
        raise SpecError(f"{what}: '{text}' is not an age", "give a number and a unit: 30d, 12h, 90m, 2w")
    return float(found.group(1)) * AGE_UNITS[found.group(2).lower()]


def parse_count(text: str, what: str) -> int:
    if not text.strip().isdigit():
        raise SpecError(f"{what}: '{text}' is not a count of runs", "give a whole number >= 0, e.g. 200")
    return int(text)


def configured_bound(environ: dict[str, str] | None = None) -> Bound:
    """The bound applied after every run: the defaults, changed by LAB_RUNS_MAX_COUNT/_SIZE/_AGE ('off' lifts one)."""
    environ = os.environ if environ is None else environ

    def read(variable, parse, default):
        if variable not in environ:
            return default
        value = environ[variable]
        if value.strip().lower() in OFF:
            return None
        try:
            return parse(value, variable)
        except SpecError as error:
            raise SpecError(error.message, f"{error.hint}, or `off` for no limit") from None

    return Bound(read(COUNT_VARIABLE, parse_count, DEFAULT_MAX_COUNT), read(SIZE_VARIABLE, parse_size, DEFAULT_MAX_SIZE),
                 read(AGE_VARIABLE, parse_age, DEFAULT_MAX_AGE))


def choose_removals(runs: list[StoredRun], bound: Bound, now: float) -> list[StoredRun]:
    """The runs to remove, oldest first, so that what stays fits `bound`; pinned runs and runs in progress stay.

    Runs too old go first; then the oldest of the rest until both the count and the total size fit. Pinned and
    in-progress runs count towards the bound but are never chosen, so the rest may have to shrink further.
    """
    ordered = sorted(runs, key=lambda run: (run.started, run.run_id))
    removable = [run for run in ordered if not run.kept and not run.in_progress]
    chosen = []
    if bound.max_age is not None:
        chosen = [run for run in removable if now - run.started > bound.max_age]
    too_old = {run.run_id for run in chosen}
    count = len(ordered) - len(chosen)
    size = sum(run.size for run in ordered) - sum(run.size for run in chosen)
    for run in removable:
        if run.run_id in too_old:
            continue
        over_count = bound.max_count is not None and count > bound.max_count
        over_size = bound.max_size is not None and size > bound.max_size
        if not over_count and not over_size:
            break
        chosen.append(run)
        count -= 1
        size -= run.size
    return sorted(chosen, key=lambda run: (run.started, run.run_id))


def stored_runs(runs_dir: Path | None = None) -> list[StoredRun]:
    """Every record folder under the runs folder, oldest first (the `latest` link is not one)."""
    runs_dir = runs_dir or paths.runs_dir()
    if not runs_dir.is_dir():
        return []
    found = []
    for folder in sorted(runs_dir.iterdir()):
        if folder.is_symlink() or not folder.is_dir():
            continue
        found.append(StoredRun(folder.name, started_at(folder), folder_size(folder), (folder / KEEP_MARKER).exists(),
                               is_recording(folder), folder))
    return found


def started_at(folder: Path) -> float:
    """When the run started: its id's UTC stamp (YYYYmmdd-HHMMSS-mmm), else the folder's modification time."""
    stamp = STAMP.match(folder.name)
    if stamp:
        try:
            moment = datetime.strptime(stamp.group(1), "%Y%m%d-%H%M%S-%f").replace(tzinfo=timezone.utc)
            return moment.timestamp()
        except ValueError:
            pass
    return folder.stat().st_mtime


def folder_size(folder: Path) -> int:
    """Bytes of every file below `folder` (links not followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def hold_recording(folder: Path) -> HeldLock | None:
    """Mark `folder`'s run as in progress until the returned lock is released (or this process ends)."""
    return try_lock(folder / RECORDING_LOCK)


def is_recording(folder: Path) -> bool:
    """True while a live process records the run in `folder`."""
    lock_file = folder / RECORDING_LOCK
    if not lock_file.exists():
        return False
    lock = try_lock(lock_file)
    if lock is None:
        return True
    lock.release()
    return False


def prune(bound: Bound, dry_run: bool = False, protect: frozenset[str] = frozenset(),
          now: float | None = None) -> list[StoredRun]:
    """Remove (or, dry, only choose) the records beyond `bound`; `protect`: run ids that stay whatever the bound."""
    runs = [run if run.run_id not in protect else StoredRun(run.run_id, run.started, run.size, run.kept, True, run.path)
            for run in stored_runs()]
    chosen = choose_removals(runs, bound, time.time() if now is None else now)
    if not dry_run:
        for run in chosen:
            shutil.rmtree(run.path, ignore_errors=True)
        if chosen:
            repoint_latest()
    return chosen


def repoint_latest() -> None:
    """`latest` names the newest record that is left (none left: no link)."""
    latest = paths.runs_dir() / "latest"
    if latest.is_symlink() and latest.resolve().is_dir():
        return
    left = [run for run in stored_runs() if (run.path / "run.json").is_file()]
    try:
        if latest.is_symlink() or latest.exists():
            latest.unlink()
        if left:
            latest.symlink_to(left[-1].run_id)
    except OSError:
        pass


def set_kept(folder: Path, kept: bool) -> bool:
    """Pin (or unpin) the run in `folder`; whether it was pinned before."""
    marker = folder / KEEP_MARKER
    was = marker.exists()
    if kept:
        marker.write_text("pinned with `lab runs --keep`: no bound or prune removes this run\n")
    elif was:
        marker.unlink()
    return was


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit, factor in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} B"


def human_age(seconds: float) -> str:
    for unit, factor in (("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= factor and seconds % factor == 0:
            return f"{seconds / factor:g}{unit}"
    return f"{seconds:g}s"
