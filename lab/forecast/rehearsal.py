"""A profiled run read back for the forecast: the rehearsal's facts, its link calibration, and per rank the profiled
steps cut into what the training thread did (compute, issue a collective, wait for one).

Read only from the record's `profile/` folder (written by exercises/jobhooks/lab_profile.py in each process and by
lab/jobs/profiling.py as the run ended). A wait is a gap in the training thread's ops during which a collective it had issued ended (the
thread blocked until it did: DDP's finalize, a synchronous all_reduce), from the gap's start to that end; every
other moment of the step is computation, Python's time between ops and a throttled node's time off the CPU included.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from lab.errors import ForecastError

PROFILE_FOLDER = "profile"
FACTS_FILE = "lab.json"
WAIT_MIN_S = 0.0002  # a shorter gap between ops is Python, not a wait
CLOCK_TOLERANCE_S = 0.0001  # the profiler's and the Flight Recorder's times of one moment differ by this, at most
# The backend's thread records a collective's end after it has woken the thread that waits: that thread's next op can
# begin before the end the profiler gives (measured on 4- and 8-node runs: a third of the collectives, by 0.2 ms
# typically and up to 4.4 ms). A gap that closes this much before a collective it waits for ends is that wait.
WAKE_BEFORE_END_S = 0.005
WARM_UP_STEPS = 2  # first steps left out of the unprofiled step times


@dataclass(frozen=True)
class Collective:
    """One collective of a step; times in seconds from the step's start."""

    op: str
    nbytes: int
    group_size: int
    issued: float
    started: float
    ended: float

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass(frozen=True)
class Action:
    """What the training thread did next: compute for `seconds`, issue collective `index`, or wait for it."""

    kind: str  # 'compute' | 'issue' | 'wait'
    seconds: float = 0.0
    index: int = -1


@dataclass(frozen=True)
class StepTrace:
    seconds: float
    collectives: tuple[Collective, ...]
    actions: tuple[Action, ...]

    @property
    def waited(self) -> float:
        return self.seconds - self.compute

    @property
    def compute(self) -> float:
        return sum(action.seconds for action in self.actions if action.kind == "compute")


@dataclass(frozen=True)
class RankProfile:
    rank: int
    node: int | None
    step_seconds: tuple[float, ...]  # every step the hook saw, profiled or not
    window: tuple[StepTrace, ...]  # the profiled steps
    window_first: int  # index in step_seconds of the first profiled step
    step_source: str  # 'optimizer' (torch.optim's step hooks) or 'mark' (lab_profile.mark_step)
    # per step: CPU seconds of the training thread, of the process, of its node (None: not recorded)
    step_cpu: tuple[tuple[float, float, float | None], ...] = ()

    def _steady(self) -> list[int]:
        """The steps outside warm-up, the profiled window and the step after it (the profiler's events are read at
        the window's end)."""
        profiled = range(self.window_first, self.window_first + len(self.window) + 1)
        return [index for index in range(len(self.step_seconds)) if index >= WARM_UP_STEPS and index not in profiled]

    @property
    def unprofiled_seconds(self) -> float:
        """Mean of the steady steps outside the profiled window and the step after it (the profiler slows what it
        watches, and its events are read at the window's end). A mean, not a median: N steps take N times the mean, and on a
        node throttled by its CPU quota a step either fits in the period's quota or waits for the next period, so
        its times fall in two groups and a median of a few steps lands in either (exercise04: 25 or 90 ms)."""
        steady = [self.step_seconds[index] for index in self._steady()]
        return statistics.fmean(steady) if steady else self.profiled_seconds

    def cpu_seconds(self, which: int) -> float | None:
        """Mean CPU seconds a steady step took: 0 the training thread's, 1 the process's, 2 the node's."""
        spent = [self.step_cpu[index][which] for index in self._steady() if index < len(self.step_cpu)]
        return statistics.fmean(spent) if spent and None not in spent else None

    @property
    def profiled_seconds(self) -> float:
        return statistics.fmean(step.seconds for step in self.window)

    @property
    def waited_seconds(self) -> float:
        return statistics.fmean(step.waited for step in self.window)


@dataclass(frozen=True)
class Rehearsal:
    nodes: int
    nproc_per_node: int
    link: str | None
    cpus: float | None
    calibration: dict
    ranks: tuple[RankProfile, ...]
    command: tuple[str, ...] = ()

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    @property
    def step_seconds(self) -> float:
        """The measured step time: median over ranks of the mean of their unprofiled steady steps."""
        return statistics.median(rank.unprofiled_seconds for rank in self.ranks)

    def node_cpu_seconds(self) -> tuple[float, float] | None:
        """A node's CPU seconds per steady step, median over the nodes: (its ranks' training threads, all of it
        with gloo's threads, the launcher and anything else on it). None where the profile has no CPU times."""
        nodes: dict = {}
        for rank in self.ranks:
            nodes.setdefault(rank.node, []).append((rank.cpu_seconds(0), rank.cpu_seconds(2)))
        per_node = []
        for ranks in nodes.values():
            threads, node = [t for t, _ in ranks], [n for _, n in ranks]
            if None in threads or None in node:
                return None
            per_node.append((sum(threads), max(statistics.median(node), sum(threads))))
        if not per_node:
            return None
        return statistics.median(t for t, _ in per_node), statistics.median(n for _, n in per_node)

    @property
    def comm_share(self) -> float:
        """The measured share of a step the training thread waited for communication: its waits in the profiled
        steps over its step time outside them (the profiler slows computation, not the link)."""
        return statistics.median(min(1.0, rank.waited_seconds / rank.unprofiled_seconds) for rank in self.ranks)


def step_trace(start_ns: int, end_ns: int, collectives: list[dict], busy: list[list[int]]) -> StepTrace:
    """One step from the profile's raw times (ns): its collectives, and the training thread's actions in order."""
    def since(ns) -> float:
        return (int(ns) - start_ns) / 1e9

    ours = sorted((c for c in collectives if start_ns <= int(c.get("issued_ns") or c["started_ns"]) < end_ns),
                  key=lambda c: int(c.get("issued_ns") or c["started_ns"]))
    steps = tuple(Collective(str(c["op"]), int(c.get("bytes") or 0), int(c.get("group_size") or 0),
                             since(c.get("issued_ns") or c["started_ns"]), since(c["started_ns"]), since(c["ended_ns"]))
                  for c in ours)
    seconds = (end_ns - start_ns) / 1e9
    intervals = sorted((max(0.0, since(s)), min(seconds, since(e))) for s, e in busy if since(e) > 0 and since(s) < seconds)
    gaps, cursor = [], 0.0
    for begin, finish in intervals:
        if begin > cursor:
            gaps.append((cursor, begin))
        cursor = max(cursor, finish)
    if cursor < seconds:
        gaps.append((cursor, seconds))
    moments = [(c.issued, "issue", index, c.issued) for index, c in enumerate(steps)]
    for begin, finish in gaps:
        if finish - begin < WAIT_MIN_S:
            continue
        # The thread can wait only for what it issued before, and wakes after (never before) the collective ended.
        # It waits until the last such end in the gap; what follows (a node over its CPU quota is throttled for up
        # to most of a 100 ms period before it runs again) is not waiting for the link, and counts as computation.
        ended = [index for index, c in enumerate(steps) if c.issued <= begin + CLOCK_TOLERANCE_S
                 and begin < c.ended <= finish + WAKE_BEFORE_END_S]
        if ended:
            last = max(ended, key=lambda index: steps[index].ended)
            moments.append((begin, "wait", last, min(finish, steps[last].ended)))
    actions, clock = [], 0.0
    for at, kind, index, until in sorted(moments, key=lambda moment: (moment[0], moment[1] == "wait")):
        if at > clock:
            actions.append(Action("compute", at - clock))
        actions.append(Action(kind, index=index))
        clock = max(clock, until)
    if seconds > clock:
        actions.append(Action("compute", seconds - clock))
    return StepTrace(seconds, steps, tuple(actions))


def rank_profile(data: dict) -> RankProfile | None:
    """A RankProfile from one process's profile JSON; None when it has no profiled window with steps."""
    steps = [(int(start), int(end)) for start, end in data.get("steps") or []]
    window = data.get("window") or {}
    if not steps or "collectives" not in window:
        return None
    start, end = int(window["start_ns"]), int(window["end_ns"])
    inside = [(index, step) for index, step in enumerate(steps) if step[0] >= start and step[1] <= end]
    if not inside:
        return None
    traces = tuple(step_trace(s, e, window["collectives"], window.get("busy") or []) for _, (s, e) in inside)
    return RankProfile(int(data.get("rank") or 0), data.get("node"), tuple((e - s) / 1e9 for s, e in steps), traces,
                       inside[0][0], str(data.get("step_source") or "optimizer"), _step_cpu(data.get("cpu") or []))


def _step_cpu(marks: list) -> tuple[tuple[float, float, float | None], ...]:
    """CPU seconds per step from the CPU times at each step boundary (thread, process, node in ns)."""
    steps = []
    for before, after in zip(marks, marks[1:]):
        node = (after[2] - before[2]) / 1e9 if after[2] is not None and before[2] is not None else None
        steps.append(((after[0] - before[0]) / 1e9, (after[1] - before[1]) / 1e9, node))
    return tuple(steps)


def load_rehearsal(folder: Path, run: str = "RUN", calibrated: bool = True) -> Rehearsal:
    """The rehearsal in a record's profile folder; a ForecastError naming what it lacks otherwise. `calibrated`
    False: a run read only for what it measured (its step time and communication share), no calibration needed."""
    facts_path = folder / FACTS_FILE
    dumps = sorted(folder.glob("profile-*.json")) if folder.is_dir() else []
    if not folder.is_dir() or (not dumps and not facts_path.exists()):
        raise ForecastError(f"run {run} was not profiled: it has no profile of its steps",
                            "rehearse with `lab torchrun --profile SCRIPT` (or `lab exec --profile`) on 2 nodes")
    if not facts_path.exists():
        raise ForecastError(f"run {run} did not pass, so the lab took no calibration of its link",
                            "fix the run (`lab explain`), then rehearse again with --profile")
    facts = json.loads(facts_path.read_text())
    raw = [json.loads(path.read_text()) for path in dumps]
    ranks = [profile for profile in map(rank_profile, raw) if profile is not None]
    if not ranks:
        seen = max((len(data.get("steps") or []) for data in raw), default=0)
        raise ForecastError(f"run {run} has no profiled steps: its processes saw {seen} training step(s) "
                            f"(a step ends at optimizer.step(); the profile needs 10: 4 warm-up, 6 profiled; up to 30 after them give the step time)",
                            "train for more steps, or mark each step with `import lab_profile; lab_profile.mark_step()`")
    if not any(step.collectives for rank in ranks for step in rank.window):
        raise ForecastError(f"run {run} ran no collectives in its profiled steps: nothing is communicated to forecast",
                            "is it distributed (DDP, FSDP, torch.distributed calls)?")
    calibration = facts.get("calibration") or {}
    if calibrated and ("error" in calibration or not calibration.get("all_reduce")):
        raise ForecastError(f"run {run} has no calibration of its link: {calibration.get('error', 'none taken')}",
                            "rehearse again with --profile on a lab of 2 or more nodes")
    return Rehearsal(int(facts["nodes"]), int(facts["nproc_per_node"]), facts.get("link"), facts.get("cpus"),
                     calibration, tuple(sorted(ranks, key=lambda rank: rank.rank)), tuple(facts.get("command") or ()))
