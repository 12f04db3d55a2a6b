"""`lab run --all --jobs N`: exercises N at a time, each on a lab of its own.

A lab runs one exercise at a time (exercises kill nodes, shape links and take ports), so more at once needs more
labs: the lab itself and N-1 copies of its spec (NAME-copy1, ...), brought up beside the first exercise and removed
at the end however the run ends. Most exercises wait more than they compute (timeouts, restarts, sleeps): on 2 cores,
all 13 took 178 s one at a time and 129 s two at a time (bench/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable

from lab.analysis.record import RunRecord, list_runs
from lab.errors import LabError, SpecError
from lab.jobs import targets
from lab.jobs.exercises import Exercise
from lab.jobs.launch import Reporter
from lab.model.spec import NAME_PATTERN
from lab.nodes import lifecycle as labs

COPY_SUFFIX = "-copy"


def copy_names(name: str, jobs: int) -> list[str]:
    """The labs besides `name` that `jobs` at a time need; a name too long to copy is a SpecError."""
    names = [f"{name}{COPY_SUFFIX}{index}" for index in range(1, jobs)]
    if names and not NAME_PATTERN.match(names[-1]):
        raise SpecError(f"lab name '{name}' is too long to name its copies ({names[-1]})",
                        "run with --jobs 1, or on a lab with a shorter name")
    return names


def longest_first(exercises: list[Exercise], past: list[RunRecord]) -> list[Exercise]:
    """The exercises by how long their newest finished run took, longest first, so no long one starts last.

    Exercises never run come first (nothing says they are short), those of more steps (launches) first.
    """
    seconds = {record.exercise: record.seconds for record in past if record.status in ("passed", "failed")}
    return sorted(exercises, key=lambda exercise: (exercise.name in seconds, -seconds.get(exercise.name, 0),
                                                   -len(exercise.steps)))


@dataclasses.dataclass
class LabelledReporter:
    """Events of one lab's runs, marked with the lab; node output is not shown (runs on other labs interleave)."""

    reporter: Reporter
    lab: str

    def line(self, node: int, text: str) -> None:
        pass

    def event(self, text: str) -> None:
        self.reporter.event(f"[{self.lab}] {text}")


RunOne = Callable[[Exercise, targets.Target, Reporter], RunRecord]


def run_spread(exercises: list[Exercise], name: str, jobs: int, run_one: RunOne, reporter: Reporter) -> list[RunRecord]:
    """Run `exercises` on lab `name` and jobs-1 copies of it, one exercise per lab at a time; records in input order.

    A copy that cannot come up (memory, a name taken by a lab with another spec) is reported and the others go on
    without it. The first error of any run stops new runs from starting and is raised once every lab is idle.
    """
    copies = copy_names(name, min(jobs, len(exercises)))
    _, spec, _ = labs.require(name)
    queue = deque(longest_first(exercises, list_runs()))
    lock = threading.Lock()
    records: dict[str, RunRecord] = {}
    failures: list[BaseException] = []
    stopping = threading.Event()
    settled = {copy: threading.Event() for copy in copies}  # its `up` is over: from then on `down` may take it

    def drain(target: targets.Target) -> None:
        labelled = LabelledReporter(reporter, target.label)
        while not stopping.is_set():
            with lock:
                if not queue:
                    return
                exercise = queue.popleft()
            try:
                record = run_one(exercise, target, labelled)
            except Exception as error:  # handed to the main thread, which raises it (Ctrl-C there goes straight up)
                failures.append(error)
                stopping.set()
                return
            records[exercise.name] = record
            labelled.event(f"{exercise.name}: {record.status.upper()} in {record.seconds:.1f} s")

    def on_copy(copy: str) -> None:
        try:
            if stopping.is_set():
                return
            labs.up(dataclasses.replace(spec, name=copy))
            target = targets.containers(copy)
        except LabError as error:
            reporter.event(f"lab '{copy}' could not come up ({error.message}); going on without it")
            return
        finally:
            settled[copy].set()
        drain(target)

    threads = [threading.Thread(target=on_copy, args=(copy,), name=f"lab-run-{copy}", daemon=True) for copy in copies]
    reporter.event(f"running {len(exercises)} exercises {min(jobs, len(exercises))} at a time, on lab '{name}'"
                   + (f" and its copies {', '.join(copies)} (removed at the end)" if copies else ""))
    for thread in threads:
        thread.start()
    try:
        drain(targets.containers(name))
        for thread in threads:
            thread.join()
    finally:  # Ctrl-C included: no copy outlives the run; removing one ends whatever still runs on it
        stopping.set()
        for copy in copies:
            settled[copy].wait()
            try:
                labs.down(copy)
            except LabError as error:
                reporter.event(f"could not remove lab '{copy}': {error.message}; `lab down --name {copy}` does")
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return [records[exercise.name] for exercise in exercises if exercise.name in records]
