"""`lab run -j N` (lab/jobs/spread.py): every exercise once, each lab one at a time, the copies gone at the end."""

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lab.analysis.record import RunRecord
from lab.errors import LabStateError, RunError, SpecError
from lab.jobs import spread
from lab.jobs.exercises import Exercise
from lab.model.spec import LabSpec


def exercise(number: int, steps: int = 1) -> Exercise:
    return Exercise(number, f"exercise{number:02d}", "x", Path("."), "t", "s", 2, 1, 30,
                    tuple(SimpleNamespace(name=f"s{i}") for i in range(steps)))


def record(name: str, seconds: float, status: str = "passed") -> RunRecord:
    return RunRecord("id", name, "default", Path("."), status=status, seconds=seconds)


class FakeLabs:
    """lifecycle as spread uses it: `up` makes a lab, `down` removes it; `refuse` names copies that cannot come up."""

    def __init__(self, refuse=()):
        self.up_now, self.made, self.removed, self.refuse = {"default"}, [], [], set(refuse)

    def require(self, name):
        return None, LabSpec(name=name, nodes=2), []

    def up(self, spec):
        if spec.name in self.refuse:
            raise LabStateError("not enough memory")
        assert spec.nodes == 2  # the lab's own spec, renamed
        self.up_now.add(spec.name)
        self.made.append(spec.name)

    def down(self, name):
        self.up_now.discard(name)
        self.removed.append(name)


@pytest.fixture
def labs(monkeypatch):
    fake = FakeLabs()
    monkeypatch.setattr(spread, "labs", fake)
    monkeypatch.setattr(spread.targets, "containers", lambda name: SimpleNamespace(label=name))
    monkeypatch.setattr(spread, "list_runs", lambda: [])
    return fake


class Events:
    def __init__(self):
        self.texts = []

    def line(self, node, text):
        raise AssertionError("node output is not shown when runs interleave")

    def event(self, text):
        self.texts.append(text)


def runner(seconds=0.02, fail=None):
    """A run_one that records which lab ran what, and checks no lab ever runs two exercises at once."""
    busy, ran, lock = set(), [], threading.Lock()

    def run_one(one, target, reporter):
        with lock:
            assert target.label not in busy
            busy.add(target.label)
        try:
            reporter.line(0, "hidden")  # LabelledReporter drops it
            time.sleep(seconds)
            if one.name == fail:
                raise fail_error
            ran.append((one.name, target.label))
            return record(one.name, seconds)
        finally:
            with lock:
                busy.discard(target.label)

    fail_error = RunError("the engine went away")
    return run_one, ran


def test_copies_are_named_after_the_lab_and_must_be_valid_names():
    assert spread.copy_names("default", 3) == ["default-copy1", "default-copy2"]
    assert spread.copy_names("default", 1) == []
    with pytest.raises(SpecError, match="too long to name its copies"):
        spread.copy_names("a" * 30, 2)


def test_longest_first_uses_the_newest_finished_runs_and_puts_unknown_ones_first_by_steps():
    exercises = [exercise(1), exercise(4, steps=2), exercise(10, steps=2), exercise(12, steps=6), exercise(13)]
    past = [record("exercise01", 50.0), record("exercise01", 3.0), record("exercise10", 49.0),
            record("exercise04", 22.0), record("exercise04", 900.0, status="interrupted")]
    order = [one.name for one in spread.longest_first(exercises, past)]
    assert order == ["exercise12", "exercise13", "exercise10", "exercise04", "exercise01"]


def test_every_exercise_runs_once_spread_over_the_lab_and_its_copies_which_are_removed(labs):
    run_one, ran = runner()
    events = Events()
    exercises = [exercise(number) for number in range(1, 9)]
    records = spread.run_spread(exercises, "default", 3, run_one, events)
    assert [r.exercise for r in records] == [one.name for one in exercises]  # input order, whoever ran them
    assert sorted(name for name, _ in ran) == [one.name for one in exercises]
    assert {lab for _, lab in ran} == {"default", "default-copy1", "default-copy2"}
    assert sorted(labs.made) == sorted(labs.removed) == ["default-copy1", "default-copy2"]
    assert labs.up_now == {"default"}
    assert any("exercise01: PASSED" in text for text in events.texts)


def test_no_more_copies_than_exercises(labs):
    run_one, ran = runner()
    spread.run_spread([exercise(1), exercise(2)], "default", 8, run_one, Events())
    assert labs.made == ["default-copy1"] and len(ran) == 2


def test_a_copy_that_cannot_come_up_leaves_the_work_to_the_others(labs):
    labs.refuse.add("default-copy1")
    run_one, ran = runner()
    events = Events()
    records = spread.run_spread([exercise(1), exercise(2), exercise(3)], "default", 2, run_one, events)
    assert len(records) == 3 and {lab for _, lab in ran} == {"default"}
    assert any("'default-copy1' could not come up (not enough memory)" in text for text in events.texts)


def test_an_error_stops_new_runs_and_is_raised_after_the_copies_are_gone(labs):
    run_one, ran = runner(fail="exercise01")
    with pytest.raises(RunError, match="the engine went away"):
        spread.run_spread([exercise(number) for number in range(1, 7)], "default", 2, run_one, Events())
    assert labs.up_now == {"default"} and len(ran) < 5


def test_ctrl_c_removes_the_copies(labs):
    def interrupted(one, target, reporter):
        if target.label == "default":
            raise KeyboardInterrupt
        time.sleep(0.05)
        return record(one.name, 0.05)

    with pytest.raises(KeyboardInterrupt):
        spread.run_spread([exercise(number) for number in range(1, 5)], "default", 2, interrupted, Events())
    assert labs.up_now == {"default"} and "default-copy1" in labs.removed
