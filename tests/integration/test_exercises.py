"""Every exercise runs on a real 2-node lab and every one of its checks passes."""

import json

import pytest

from lab.jobs.exercises import discover

from .conftest import lab

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize("exercise", [e.name for e in discover()])
def test_exercise_passes_on_two_nodes(two_nodes, exercise):
    result = lab("run", exercise, "--name", two_nodes, "--json", timeout=900)
    assert result.stdout.strip(), f"exit {result.returncode}, nothing on stdout; stderr: {result.stderr[-2000:]}"
    records = json.loads(result.stdout)
    failed = [check for record in records for check in record["checks"] if not check["passed"]]
    assert result.returncode == 0 and not failed, (failed, result.stderr[-2000:])
    assert records[0]["status"] == "passed"
