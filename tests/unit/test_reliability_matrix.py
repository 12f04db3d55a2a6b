"""RELIABILITY.md is rendered from stored trial results: counts, test outcomes, failures and their known causes."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from reliability_matrix import render  # noqa: E402
from trials import HEADERS  # noqa: E402


def part(name, trials, failures=(), **counts):
    return {"part": name, "expected": "", "trials": trials, "completed_first": 0, "objects_left": 0,
            "folders_left": 0, "processes_left": 0, "failures": list(failures), "seconds": 12.3, "outcomes": {},
            "seed": 7, "load": "load 1.00 1.00 1.00", "date": "2026-11-23 12:00", **counts}


def test_render_shows_counts_outcomes_and_failures():
    tests = part("tests", 3, ["test_faults::test_delay_without_netem_is_one_line failed"], outcomes={
        "test_faults::test_delay_without_netem_is_one_line": "failed",
        "test_bad_input::test_bad_input_against_a_running_lab[a]": "passed",
        "test_bad_input::test_bad_input_against_a_running_lab[b]": "passed"})
    stored = {"sigint": part("sigint", 30, ["sigint 3 at 5.86 s: exit 6:\n[ 0.1 s] starting"], objects_left=4),
              "cycles": part("cycles", 20), "tests": tests}
    text = render(stored, HEADERS)
    assert "30 trials, 1 failed; 4 objects, 0 folders, 0 processes left" in text
    assert "tests: 2 passed" in text and "tests: 1 failed" in text
    assert "### sigint: 1 failed trial(s)" in text and "Cause: " in text
    assert "- sigint 3 at 5.86 s: exit 6: [ 0.1 s] starting" in text  # one line per failure
    assert "| sigkill" not in text and "not run" in text  # a part never run is said to be so
    assert "### cycles" not in text
