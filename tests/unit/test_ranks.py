"""A line per rank (`lab explain`, `lab report`), read from run records made of real runs on a 2-node lab
(tests/unit/diagnosis_samples/: logs, stacks and Flight Recorder dumps as the lab kept them)."""

import json
import shutil
from pathlib import Path

from lab.analysis.ranks import format_ranks, rank_lines
from lab.analysis.record import RunRecord, StepRecord
from lab.analysis.report import render

SAMPLES = Path(__file__).parent / "diagnosis_samples"


def record_of(sample: str, timed_out: bool = False) -> RunRecord:
    """A run record holding what the lab kept of the sample's run: logs, stacks, flight dumps, exit codes."""
    folder = SAMPLES / sample
    run = json.loads((folder / "run.json").read_text())
    record = RunRecord.new("exec", "lab")
    record.status = "failed"
    codes = {int(node): code for node, code in run["exit_codes"].items()}
    record.steps = [StepRecord("main", command=run["command"], exit_codes=codes, timed_out=timed_out)]
    (record.path / "logs").mkdir(parents=True)
    for node in codes:
        shutil.copy(folder / f"node{node}.log", record.path / "logs" / f"node{node}-main.log")
    record.stacks_dir.mkdir()
    if (folder / "stacks.json").is_file():
        shutil.copy(folder / "stacks.json", record.stacks_dir / "stacks.json")
    if (folder / "flight").is_dir():
        shutil.copytree(folder / "flight", record.stacks_dir / "flight")
    record.save()
    return record


def test_the_rank_that_ran_fewer_collectives_is_behind(own_lab_home):
    record = record_of("uneven_batches")
    lines = rank_lines(record, record.steps[0])
    assert [line.text() for line in lines] == [
        "rank 0 node0; exit 1; last collective #9 all_reduce float[9]",
        "rank 1 node1; exit 0; last collective #8 all_reduce float[9] (1 behind); last output: rank 1: done after 3 "
        "batches"]


def test_a_hung_run_shows_where_each_rank_waits_and_in_which_collective(own_lab_home):
    record = record_of("collective_mismatch_hang", timed_out=True)
    assert format_ranks(record).splitlines() == [
        "ranks:",
        "  rank 0 node0; stopped by the lab; waits in all_reduce (collective_mismatch.py:19); in #1 all_reduce float[1]",
        "  rank 1 node1; stopped by the lab; waits in barrier (collective_mismatch.py:17); in #1 barrier"]


def test_without_a_flight_recorder_the_ranks_still_say_how_they_ended_and_where_they_waited(own_lab_home):
    record = record_of("repeated_node_rank_hang", timed_out=True)
    texts = [line.text() for line in rank_lines(record, record.steps[0])]
    assert texts == ["rank 0 node0; stopped by the lab; waits in init_process_group (repeated_node_rank.py:14)",
                     "rank 0 node1; stopped by the lab; waits in init_process_group (repeated_node_rank.py:14)"]
    # both processes claim rank 0: a line each, and no rank 1 that no process claimed


def test_a_run_that_passed_has_no_rank_lines(own_lab_home):
    record = record_of("uneven_batches")
    record.steps[0].exit_codes = {0: 0, 1: 0}
    assert format_ranks(record) == ""


def test_the_report_has_a_row_per_rank_the_one_behind_marked(own_lab_home):
    page = render(record_of("uneven_batches"))
    assert "<h2>Ranks</h2>" in page and page.count('<tr class="behind">') == 1
    assert '<tr class="behind"><td>1</td><td>node1</td><td>exit 0</td>' in page


def test_the_rank_that_entered_the_collective_late_stands_out(own_lab_home):
    """Rank 1 reached DDP's first collective 7.3 s after rank 0 began waiting there (its timeout: 5 s)."""
    record = record_of("late_past_the_timeout_torchrun")
    texts = [line.text() for line in rank_lines(record, record.steps[0])]
    assert texts[0].startswith("rank 0 node0; exit 1; last collective #1 all_gather int64[1]")
    assert "entered" not in texts[0]
    assert texts[1] == ("rank 1 node1; exit 1; last collective #1 all_gather int64[1], entered 7.3 s after rank 0; "
                        "last output: rank 1: prepared 64 rows")
    page = render(record)
    assert page.count('<tr class="behind">') == 1 and "entered 7.3 s after rank 0" in page
