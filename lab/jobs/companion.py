"""Exercises that need packages their lab lacks (`requirements:` in exercise.yaml) run on a companion lab.

The companion is the lab's own spec with those packages added (`lab up --pip`, a layer on the node image), named
NAME-pkgs. It is brought up in the background while the other exercises run, so its layer is built meanwhile, and
removed when the run ends, however it ends. A lab whose spec already asks for the packages runs them itself.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable

from lab.analysis.record import RunRecord
from lab.errors import LabError, SpecError
from lab.jobs import targets
from lab.jobs.exercises import Exercise
from lab.jobs.launch import Reporter
from lab.model.spec import NAME_PATTERN, LabSpec
from lab.nodes import lifecycle as labs

COMPANION_SUFFIX = "-pkgs"

RunMany = Callable[[list[Exercise], targets.Target | None], list[RunRecord]]


def missing_requirements(exercises: list[Exercise], spec: LabSpec) -> tuple[str, ...]:
    """The requirement lines the exercises name that the lab's spec does not, in order, once each."""
    return tuple(dict.fromkeys(line for exercise in exercises for line in exercise.requirements
                               if line not in spec.requirements))


def companion_spec(spec: LabSpec, requirements: tuple[str, ...]) -> LabSpec:
    name = f"{spec.name}{COMPANION_SUFFIX}"
    if not NAME_PATTERN.match(name):
        raise SpecError(f"lab name '{spec.name}' is too long to name the lab for exercises with packages ({name})",
                        "run them on a lab with a shorter name, or `lab up --pip ...` them into this lab")
    return dataclasses.replace(spec, name=name, requirements=spec.requirements + requirements)


def run_with_companion(exercises: list[Exercise], name: str, run_many: RunMany, reporter: Reporter,
                       at_once: bool = False) -> list[RunRecord]:
    """Run `exercises` on lab `name` (run_many(exercises, None)) and those it lacks packages for on its companion
    (run_many(exercises, target)): after the others, or (`at_once`, `lab run --jobs N` with N > 1) as soon as the
    companion is up, beside them. Records in the order of `exercises`."""
    if not any(exercise.requirements for exercise in exercises):
        return run_many(exercises, None)
    _, spec, _ = labs.require(name)
    needed = missing_requirements(exercises, spec)
    if not needed:
        return run_many(exercises, None)
    companion = companion_spec(spec, needed)
    later = [exercise for exercise in exercises if set(exercise.requirements) - set(spec.requirements)]
    now = [exercise for exercise in exercises if exercise not in later]
    reporter.event(f"{', '.join(e.name for e in later)} need {' '.join(needed)}: lab '{companion.name}' "
                   "(this lab's spec with them) comes up meanwhile, runs them " + ("as soon as it is up" if at_once
                   else "after the others") + ", and is removed at the end")
    outcome: dict[str, object] = {}
    settled = threading.Event()  # the companion's `up` is over: from then on `down` may take it

    def bring_up() -> None:
        try:  # a lab of that name with another spec is refused, not replaced: it may be somebody's
            try:
                labs.up(companion)
                outcome["target"] = targets.containers(companion.name)
            finally:
                settled.set()
            if at_once:
                outcome["records"] = run_many(later, outcome["target"])
        except BaseException as error:  # handed to the main thread
            outcome["error"] = error

    thread = threading.Thread(target=bring_up, name=f"lab-up-{companion.name}", daemon=True)
    thread.start()
    records: list[RunRecord] = []
    try:
        records += run_many(now, None) if now else []
        thread.join()
        if "error" in outcome:
            error = outcome["error"]
            if not isinstance(error, LabError) or "target" in outcome:
                raise error
            raise type(error)(f"lab '{companion.name}' for {', '.join(e.name for e in later)} could not come up: "
                              f"{error.message}", error.hint)
        records += outcome["records"] if at_once else run_many(later, outcome["target"])
    finally:  # Ctrl-C included: the companion does not outlive the run (one that never came up was not ours);
        settled.wait()  # removing it ends whatever still runs on it
        if "target" in outcome:
            try:
                labs.down(companion.name)
            except LabError as error:
                reporter.event(f"could not remove lab '{companion.name}': {error.message}; "
                               f"`lab down --name {companion.name}` does")
        thread.join()
    order = {exercise.name: index for index, exercise in enumerate(exercises)}
    return sorted(records, key=lambda record: order.get(record.exercise, len(order)))
