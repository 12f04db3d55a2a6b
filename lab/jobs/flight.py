"""What every process of a run was doing in torch.distributed, written out by the processes themselves.

The `sitecustomize` the lab gives every job's processes (exercises/jobhooks/, first on PYTHONPATH, so it reaches
torchrun's workers and spawned children too) writes JSON into LAB_FLIGHT_DIR: `exit-*` when a process ends, `live-*`
when the lab asks a hung run before stopping it (dump_live), and `pending-*` as soon as one of its calls has been
pending for a second, since ranks stuck in C are ended by SIGTERM or SIGKILL with no chance to write at exit. Each
holds torch's Flight Recorder (its last collectives: on by default for gloo and NCCL, but dumped only on request)
and the process's torch.distributed calls with their arguments, the one that raised, and its own store operations
(what the recorder lacks: send/recv, a broadcast's root, a subgroup's members, the store keys it waited for). The
dumps land in the lab's shared folder and move into the run record (`stacks/flight/`), where lab/analysis/flight.py
and lab/analysis/calls.py read them. Targets whose nodes share no folder with this machine (an inventory's hosts)
record none.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from lab.jobs.transports import Transport

LIVE_WAIT_SECONDS = 3.0  # how long a hung run's processes get to write what they hold
QUIET_SECONDS = 0.6  # the hook looks for a request every 0.25 s: no new dump for this long means all have answered
FIRST_DUMP_SECONDS = 1.0  # no dump at all by then: nothing of the run records collectives
POLL_SECONDS = 0.1


@dataclass(frozen=True)
class FlightRecording:
    """Where one launch's processes write their recorders, as the nodes and as this machine see it."""

    node_dir: str
    host_dir: Path

    def env(self, env: dict[str, str], profile: bool = False) -> dict[str, str]:
        """`env` with the folder the job's processes write their recorders to (and, `profile`, their profiled steps:
        exercises/jobhooks/lab_profile.py)."""
        return {**env, "LAB_FLIGHT_DIR": self.node_dir, **({"LAB_PROFILE_DIR": self.node_dir} if profile else {})}

    def keep_profiles(self, destination: Path) -> int:
        """Move the processes' profiled steps into the run record (`destination`), whether the run passed or not;
        how many there were."""
        profiles = sorted(self.host_dir.glob("profile-*.json")) if self.host_dir.is_dir() else []
        if profiles:
            destination.mkdir(parents=True, exist_ok=True)
            for profile in profiles:
                shutil.move(profile, destination / profile.name)
        return len(profiles)

    def dump_live(self) -> None:
        """Ask every live process of the run to write its recorder, and give them a moment: until no new dump has
        come for QUIET_SECONDS after the first, FIRST_DUMP_SECONDS when none comes (no process of the run uses
        torch.distributed), LIVE_WAIT_SECONDS at most."""
        self.host_dir.mkdir(parents=True, exist_ok=True)
        (self.host_dir / "dump-request").write_text(str(time.time()))
        start = time.monotonic()
        seen, last_new = 0, None
        while time.monotonic() - start < LIVE_WAIT_SECONDS:
            count = len(list(self.host_dir.glob("live-*.json")))
            if count > seen:
                seen, last_new = count, time.monotonic()
            elif time.monotonic() - (last_new or start) >= (QUIET_SECONDS if last_new else FIRST_DUMP_SECONDS):
                return
            time.sleep(POLL_SECONDS)

    def keep(self, destination: Path | None) -> None:
        """Move the dumps (exit, live and pending ones; SIGTERM stacks) into the run record (`destination`; None: the
        run passed, nothing to understand), and clear the shared folder."""
        dumps = sorted([*self.host_dir.glob("*.json"), *self.host_dir.glob("term-*.txt")]) \
            if self.host_dir.is_dir() and destination else []
        if dumps:
            destination.mkdir(parents=True, exist_ok=True)
            for dump in dumps:
                shutil.move(dump, destination / dump.name)
        shutil.rmtree(self.host_dir, ignore_errors=True)


def recording_for(transport: Transport, process_run_id: str) -> FlightRecording | None:
    """Where one launch's processes write their recorders; None where the nodes share no folder with this machine."""
    if not transport.shares_folder:
        return None
    relative = f"flight/{process_run_id}"
    return FlightRecording(f"{transport.shared_dir}/{relative}", transport.host_shared_dir / relative)
