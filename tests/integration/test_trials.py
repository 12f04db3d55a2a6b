"""A short run of bench/trials.py: Ctrl-C and SIGKILL of `lab up`, up/down cycles, repeated runs, timed faults."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TRIALS = Path(__file__).resolve().parents[2] / "bench" / "trials.py"


def test_a_handful_of_interruption_trials_leave_nothing(tmp_path):
    result = subprocess.run([sys.executable, str(TRIALS), "--only", "sigint,sigkill,cycles,runs,faults", "--trials", "1",
                             "--seed", "20261123", "--results", str(tmp_path / "trials.json")],
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    table = [line.split("|") for line in result.stdout.splitlines() if line.startswith("| ")][1:]
    assert [row[1].strip() for row in table] == ["sigint", "sigkill", "cycles", "runs", "faults"]
    for row in table:
        assert [cell.strip() for cell in row[4:8]] == ["0", "0", "0", "0"], row  # objects, folders, processes, failed
