"""Exercises that need packages their lab lacks run on a companion lab: which ones, its spec, and that it is removed
whatever happens (fake lifecycle: no engine)."""

import dataclasses
from pathlib import Path

import pytest

from lab.analysis.record import RunRecord
from lab.errors import LabError, SpecError
from lab.jobs import companion
from lab.jobs.exercises import Exercise
from lab.model.spec import LabSpec


def exercise(name: str, *requirements: str) -> Exercise:
    return Exercise(int(name[-2:]), name, "x", Path("/x"), name, "", 2, 1, 60, (), tuple(requirements))


PLAIN, ACCELERATE, LIGHTNING = exercise("exercise01"), exercise("exercise14", "accelerate==1.15.0"), \
    exercise("exercise15", "lightning==2.6.6", "accelerate==1.15.0")


def test_only_what_the_lab_lacks_is_added_once_in_order():
    spec = LabSpec(name="demo", requirements=("accelerate==1.15.0",))
    assert companion.missing_requirements([PLAIN, ACCELERATE, LIGHTNING], spec) == ("lightning==2.6.6",)
    assert companion.missing_requirements([PLAIN, LIGHTNING], LabSpec(name="demo")) == \
        ("lightning==2.6.6", "accelerate==1.15.0")
    added = companion.companion_spec(spec, ("lightning==2.6.6",))
    assert added == dataclasses.replace(spec, name="demo-pkgs", requirements=("accelerate==1.15.0", "lightning==2.6.6"))
    with pytest.raises(SpecError, match="too long"):
        companion.companion_spec(LabSpec(name="a" * 30), ("six",))


class FakeLabs:
    def __init__(self, spec: LabSpec, up_error: Exception | None = None):
        self.spec, self.up_error, self.calls = spec, up_error, []

    def require(self, name):
        return None, self.spec, []

    def up(self, spec, recreate=False):
        assert not recreate  # a lab of the companion's name with another spec may be somebody's
        self.calls.append(("up", spec.name, spec.requirements))
        if self.up_error:
            raise self.up_error

    def down(self, name):
        self.calls.append(("down", name))


@pytest.fixture
def fake(monkeypatch):
    def make(spec=LabSpec(name="demo"), up_error=None):
        labs = FakeLabs(spec, up_error)
        monkeypatch.setattr(companion, "labs", labs)
        monkeypatch.setattr(companion.targets, "containers", lambda name: f"target:{name}")
        return labs
    return make


class Events:
    def __init__(self):
        self.events = []

    def event(self, text):
        self.events.append(text)

    def line(self, node, text):
        pass


def record(name):
    return RunRecord(run_id=name, exercise=name, lab="x", path=Path("/nowhere"), status="passed")


def test_exercises_with_packages_run_last_on_the_companion_which_is_removed(fake):
    labs = fake()
    ran = []

    def run_many(some, target):
        ran.append(([e.name for e in some], target))
        return [record(e.name) for e in some]

    records = companion.run_with_companion([ACCELERATE, PLAIN], "demo", run_many, Events())
    assert ran == [(["exercise01"], None), (["exercise14"], "target:demo-pkgs")]
    assert [r.exercise for r in records] == ["exercise14", "exercise01"]  # the order asked for
    assert labs.calls == [("up", "demo-pkgs", ("accelerate==1.15.0",)), ("down", "demo-pkgs")]


def test_a_lab_with_the_packages_runs_them_itself(fake):
    labs = fake(LabSpec(name="demo", requirements=("accelerate==1.15.0",)))
    ran = []
    companion.run_with_companion([ACCELERATE], "demo", lambda some, target: ran.append(target) or [], Events())
    assert ran == [None] and labs.calls == []


def test_a_companion_that_cannot_come_up_is_one_error_and_a_lab_of_its_name_is_left_alone(fake):
    """`up` refused (another spec under that name, no memory): the lab of that name is not the run's to remove;
    `up` itself removes what it made before failing."""
    labs = fake(up_error=LabError("lab 'demo-pkgs' is already up with a different spec", "add --recreate"))
    with pytest.raises(LabError, match="lab 'demo-pkgs' for exercise14 could not come up: lab 'demo-pkgs' is already"):
        companion.run_with_companion([PLAIN, ACCELERATE], "demo", lambda some, target: [], Events())
    assert labs.calls == [("up", "demo-pkgs", ("accelerate==1.15.0",))]


def test_an_interrupted_run_removes_the_companion(fake):
    labs = fake()

    def interrupted(some, target):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        companion.run_with_companion([PLAIN, ACCELERATE], "demo", interrupted, Events())
    assert labs.calls[-1] == ("down", "demo-pkgs")


def test_with_jobs_the_companion_runs_its_exercises_as_soon_as_it_is_up_beside_the_others(fake):
    """`lab run --all --jobs N`: exercise14/15 need not wait for the other 13 (they took 109 s after them here)."""
    import threading

    labs = fake()
    later_ran = threading.Event()

    def run_many(some, target):
        if target is None:  # the lab's own exercises: still running when the companion's have run
            assert later_ran.wait(timeout=10), "the companion's exercises waited for the others"
        else:
            later_ran.set()
        return [record(e.name) for e in some]

    records = companion.run_with_companion([ACCELERATE, PLAIN], "demo", run_many, Events(), at_once=True)
    assert [r.exercise for r in records] == ["exercise14", "exercise01"]
    assert labs.calls == [("up", "demo-pkgs", ("accelerate==1.15.0",)), ("down", "demo-pkgs")]
