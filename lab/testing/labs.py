"""The labs of one test session: one per distinct spec, made on first use, reused by every test that asks for the
same, cleaned between tests, removed when the session ends (Ctrl-C included), or kept with `--lab-keep`.

Every lab carries its session as owner (lab/testing/owners.py); a session first removes the labs of sessions that
died (`kill -9`), and only those. Names carry a token of this process, so pytest-xdist workers never collide, and
the first `lab up` of a spec waits for a lock in the state folder, so the workers build an image once.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import secrets
from dataclasses import dataclass
from typing import Callable

from lab import paths
from lab.errors import LabError, LabStateError, SpecError
from lab.jobs import targets
from lab.jobs.targets import Target
from lab.locks import wait_lock
from lab.model.requirements import requirement_names
from lab.model.spec import NAME_PATTERN, LabSpec
from lab.nodes import lifecycle
from lab.nodes.processes import StacksUnavailable
from lab.testing.owners import Owner

IMAGE_LOCK = "pytest-lab-up.lock"  # in the state folder's locks/: one `lab up` of a new spec at a time
NAME_TOKEN_LENGTH = 6  # hex digits of the per-process token in lab names
MAX_PREFIX = 31 - NAME_TOKEN_LENGTH - 4  # room for '-<token>-<n>' in a 31-character lab name


@dataclass(frozen=True)
class LabRequest:
    """What a test asks of its lab (options, ini keys, marker), without a name: equal requests share a lab."""

    nodes: int = 2
    image: str = "auto"
    gpus: str = "auto"
    link: str | None = None
    requirements: tuple[str, ...] = ()  # normalised requirement lines (lab/model/requirements.py)
    workspace: str | None = None

    def with_pytest(self) -> LabRequest:
        """The request with this host's pytest for the nodes, unless it names pytest itself: the ranks run it."""
        if "pytest" in requirement_names(self.requirements):
            return self
        pin = f"pytest=={importlib.metadata.version('pytest')}"
        return dataclasses.replace(self, requirements=(*self.requirements, pin))

    def spec(self, name: str, owner: str) -> LabSpec:
        return LabSpec(name=name, nodes=self.nodes, image=self.image, gpus=self.gpus, link=self.link,
                       requirements=self.requirements, workspace=self.workspace, owner=owner)


def check_prefix(prefix: str) -> str:
    if len(prefix) > MAX_PREFIX or not NAME_PATTERN.match(prefix):
        raise SpecError(f"--lab-name-prefix '{prefix}' cannot start a lab name",
                        f"use 1-{MAX_PREFIX} lowercase letters, digits or '-', starting with a letter")
    return prefix


Progress = Callable[[str], None]


def engine_problem() -> str | None:
    """Why no lab can be made here ('no Docker engine answers'), or None."""
    from lab.nodes.driver import DockerDriver

    try:
        DockerDriver()
    except LabError as error:
        return error.message
    return None


class LabPool:
    """The labs this session made, by request; `lab()` makes one on first use, `close()` removes them all."""

    def __init__(self, prefix: str = "pytest", keep: bool = False, progress: Progress = lambda _: None):
        self.prefix = check_prefix(prefix)
        self.keep = keep
        self.progress = progress
        self.token = secrets.token_hex(NAME_TOKEN_LENGTH // 2)
        self.owner = Owner.current()
        self.labs: dict[LabRequest, str] = {}
        self.failed: dict[LabRequest, LabError] = {}
        self.swept: list[str] | None = None

    def sweep(self) -> list[str]:
        """Remove what sessions that died left behind (found by their owner label); the names removed."""
        removed = []
        for name, text in sorted(lifecycle.owners().items()):
            owner = Owner.parse(text)
            if owner is None or not owner.gone():
                continue
            try:
                lifecycle.down(name)
            except LabStateError:  # another session is removing it right now
                continue
            removed.append(name)
            self.progress(f"removed lab '{name}', left by a test session that ended without removing it ({owner})")
        return removed

    def lab(self, request: LabRequest) -> str:
        """The name of this session's lab for `request`, brought up on first use (a failure is kept and raised again
        for every test that asks for the same, without a second try)."""
        if request in self.labs:
            return self.labs[request]
        if request in self.failed:
            raise self.failed[request]
        if self.swept is None:
            self.swept = self.sweep()
        name = f"{self.prefix}-{self.token}-{len(self.labs) + len(self.failed) + 1}"
        spec = request.spec(name, str(self.owner))
        lock = wait_lock(paths.state_dir() / "locks" / IMAGE_LOCK)
        try:
            result = lifecycle.up(spec)
        except LabError as error:
            self.failed[request] = error
            raise
        finally:
            lock.release()
        self.labs[request] = name
        self.progress(f"lab '{name}' up in {result.seconds:.1f} s: {lifecycle.describe(spec)}")
        return name

    def target(self, name: str) -> Target:
        return targets.containers(name)

    def clean(self, name: str) -> int:
        """Kill every job process still in the lab's nodes (a test's daemon, a rank that outlived its run), so the next
        test starts on empty nodes; how many were killed."""
        try:
            target = self.target(name)
        except LabError:
            return 0
        killed = 0
        for index in range(target.nnodes):
            try:
                runs = {process.env.get("LAB_RUN_ID", "") for process in target.transport.processes(index, "")}
            except StacksUnavailable:  # processes cannot be read from here: each run's own kill has to do
                continue
            killed += sum(target.transport.kill(index, run, "all") for run in runs if run)
        return killed

    def close(self) -> list[str]:
        """Remove every lab of the session (none with `keep`); the names of the labs left up."""
        if self.keep:
            return list(self.labs.values())
        for name in self.labs.values():
            try:
                lifecycle.down(name)
            except LabError as error:
                self.progress(f"lab '{name}' could not be removed: {error.message}")
        self.labs.clear()
        return []
