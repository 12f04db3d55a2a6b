"""The records' bound: which runs go (choose_removals), the bound's settings, pruning on disk, pins, and `lab runs`."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import paths
from lab.analysis import retention
from lab.analysis.record import RunRecord, list_runs, load, recording
from lab.analysis.retention import Bound, StoredRun, choose_removals
from lab.cli import cli
from lab.errors import SpecError

DAY = 86400.0
NOW = 100 * DAY


def run(index: int, size: int = 10, age_days: float = 0, kept: bool = False, in_progress: bool = False) -> StoredRun:
    return StoredRun(f"run{index:03d}", NOW - age_days * DAY + index, size, kept, in_progress, Path(f"/r/{index}"))


def ids(runs) -> list[str]:
    return [r.run_id for r in runs]


def test_count_bound_removes_the_oldest_first():
    runs = [run(i) for i in range(6)]
    assert ids(choose_removals(list(reversed(runs)), Bound(4, None, None), NOW)) == ["run000", "run001"]
    assert choose_removals(runs, Bound(6, None, None), NOW) == []
    assert ids(choose_removals(runs, Bound(0, None, None), NOW)) == ids(runs)


def test_size_bound_removes_oldest_until_the_total_fits():
    runs = [run(0, 50), run(1, 30), run(2, 20), run(3, 40)]  # 140 bytes
    assert ids(choose_removals(runs, Bound(None, 70, None), NOW)) == ["run000", "run001"]  # 140-50-30 = 60
    assert ids(choose_removals(runs, Bound(None, 90, None), NOW)) == ["run000"]  # exactly 90 fits


def test_age_bound_removes_every_run_older_than_it():
    runs = [run(0, age_days=40), run(1, age_days=31), run(2, age_days=29), run(3)]
    assert ids(choose_removals(runs, Bound(None, None, 30 * DAY), NOW)) == ["run000", "run001"]


def test_bounds_combine_and_too_old_runs_count_towards_the_rest():
    runs = [run(0, 100, age_days=10), run(1, 10), run(2, 10), run(3, 10)]
    # The old run goes for its age; the other three then fit a count of 3 and a size of 30.
    assert ids(choose_removals(runs, Bound(3, 30, 5 * DAY), NOW)) == ["run000"]
    assert ids(choose_removals(runs, Bound(2, 30, 5 * DAY), NOW)) == ["run000", "run001"]


def test_pinned_and_in_progress_runs_stay_and_others_go_in_their_place():
    runs = [run(0, kept=True), run(1, in_progress=True), run(2), run(3), run(4)]
    assert ids(choose_removals(runs, Bound(3, None, None), NOW)) == ["run002", "run003"]
    assert ids(choose_removals(runs, Bound(0, None, 0), NOW)) == ["run002", "run003", "run004"]


def test_bound_from_environment_and_its_errors():
    assert retention.configured_bound({}) == Bound(retention.DEFAULT_MAX_COUNT, retention.DEFAULT_MAX_SIZE, None)
    bound = retention.configured_bound({"LAB_RUNS_MAX_COUNT": "20", "LAB_RUNS_MAX_SIZE": "off",
                                        "LAB_RUNS_MAX_AGE": "2w"})
    assert bound == Bound(20, None, 14 * DAY)
    assert retention.parse_size("1.5G", "x") == int(1.5 * 1024**3) and retention.parse_size("500MiB", "x") == 500 * 1024**2
    assert retention.parse_age("90m", "x") == 5400
    for variable, value, hint in (("LAB_RUNS_MAX_COUNT", "-3", "whole number"), ("LAB_RUNS_MAX_SIZE", "lots", "500M"),
                                  ("LAB_RUNS_MAX_AGE", "7", "30d")):
        with pytest.raises(SpecError) as raised:
            retention.configured_bound({variable: value})
        assert variable in raised.value.message and hint in raised.value.hint


def record_on_disk(stamp: str, size: int = 0, status: str = "passed") -> Path:
    folder = paths.runs_dir() / f"{stamp}-exercise01"
    folder.mkdir(parents=True)
    data = {"run_id": folder.name, "exercise": "exercise01", "lab": "l", "status": status, "seconds": 1.0}
    (folder / "run.json").write_text(json.dumps(data))
    (folder / "logs.txt").write_text("x" * size)
    return folder


@pytest.fixture
def runs_home(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    for variable in (retention.COUNT_VARIABLE, retention.SIZE_VARIABLE, retention.AGE_VARIABLE):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


def test_prune_on_disk_keeps_pins_and_repoints_latest(runs_home):
    folders = [record_on_disk(f"20260101-00000{i}-000", size=100) for i in range(5)]
    (paths.runs_dir() / "latest").symlink_to(folders[-1].name)
    retention.set_kept(folders[0], True)
    # The pinned run counts towards the bound of 3, so three unpinned ones go.
    assert ids(retention.prune(Bound(2, None, None), dry_run=True)) == [f.name for f in folders[1:4]]
    assert all(folder.is_dir() for folder in folders)  # a dry run removes nothing
    removed = retention.prune(Bound(3, None, None))
    assert [r.path for r in removed] == folders[1:3] and not folders[1].exists() and folders[0].is_dir()
    assert [r.run_id for r in list_runs()] == [folders[0].name, folders[3].name, folders[4].name]
    retention.prune(Bound(0, None, None))  # everything not kept goes; latest names what is left
    assert [r.run_id for r in list_runs()] == [folders[0].name]
    assert load("latest").run_id == folders[0].name


def test_a_run_being_recorded_is_never_pruned(runs_home):
    record_on_disk("20260101-000000-000")
    live = paths.runs_dir() / "20260101-000001-000-exec"
    live.mkdir(parents=True)
    lock = retention.hold_recording(live)
    try:
        assert retention.prune(Bound(0, None, None)) and live.is_dir()
    finally:
        lock.release()
    assert ids(retention.prune(Bound(0, None, None))) == [live.name]  # its process ended: a crashed run, removable


def test_recording_applies_the_configured_bound(runs_home, monkeypatch):
    old = [record_on_disk(f"20260101-00000{i}-000") for i in range(3)]
    monkeypatch.setenv(retention.COUNT_VARIABLE, "2")
    record = RunRecord.new("exec", "l")
    with recording(record):
        assert retention.is_recording(record.path)
        record.status = "passed"
    assert [r.run_id for r in list_runs()] == [old[2].name, record.run_id]
    assert not (record.path / retention.RECORDING_LOCK).exists()


def test_recording_with_a_bad_bound_is_one_error_and_leaves_no_folder(runs_home, monkeypatch):
    monkeypatch.setenv(retention.SIZE_VARIABLE, "huge")
    record = RunRecord.new("exec", "l")
    with pytest.raises(SpecError):
        with recording(record):
            pytest.fail("the run must not start")
    assert not record.path.exists()


def test_runs_command_sizes_prune_keep_and_errors(runs_home):
    folders = [record_on_disk(f"20260101-00000{i}-000", size=2048) for i in range(4)]
    runner = CliRunner()
    listed = runner.invoke(cli, ["runs"])
    assert listed.exit_code == 0 and re.search(r"\b2\.1 KiB", listed.output) and "bound: 500 runs, 1.0 GiB" in listed.output
    kept = runner.invoke(cli, ["runs", "--keep", folders[0].name])
    assert kept.exit_code == 0 and "is now kept" in kept.output
    dry = runner.invoke(cli, ["runs", "--prune", "--max-count", "2", "--dry-run", "--json"])
    assert [r["run"] for r in json.loads(dry.output)["removed"]] == [folders[1].name, folders[2].name]
    pruned = runner.invoke(cli, ["runs", "--prune", "--max-count", "2"])
    assert pruned.exit_code == 0 and "removed 2 run(s)" in pruned.output
    assert [r.run_id for r in list_runs()] == [folders[0].name, folders[3].name]
    assert "(kept)" in runner.invoke(cli, ["runs"]).output
    assert "no longer kept" in runner.invoke(cli, ["runs", "--unkeep", folders[0].name]).output
    for args, needle in ((["runs", "--max-count", "2"], "only go with --prune"),
                         (["runs", "--prune", "--max-size", "big"], "is not a size"),
                         (["runs", "--prune", "--max-age", "soon"], "is not an age"),
                         (["runs", "--keep", "nosuchrun"], "no run 'nosuchrun'")):
        result = runner.invoke(cli, args)  # the one-line form is checked end to end in test_cli_errors.py
        assert isinstance(result.exception, SpecError) and needle in result.exception.message, args
