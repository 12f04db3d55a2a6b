"""The runner end to end with host processes as nodes (LocalTransport): real launches, no Docker."""

import json
import shutil
from pathlib import Path

import pytest

from lab import paths
from lab.jobs.exercises import exercises_root, load_exercise
from lab.jobs.runner import RunOptions, run_exercise
from lab.jobs.targets import Target
from lab.jobs.transports import LocalTransport

JOIN = """
import sys, time, labkit, torch, torch.distributed as dist
rank = labkit.node_rank()
if '--hang' in sys.argv and rank == 1:
    time.sleep(600)
labkit.init(rank=rank, world_size=labkit.nnodes())
value = torch.tensor([float(rank)])
dist.all_reduce(value)
labkit.log(rank, f"sum={value.item()}")
labkit.write_result(rank, sum=value.item())
dist.destroy_process_group()
if '--fail' in sys.argv:
    sys.exit(3)
"""

CHECK = """
from lab.jobs.checks import Check, all_ranks_present
def check(run):
    expected = run.world_size * (run.world_size - 1) / 2
    return [all_ranks_present(run, run.world_size),
            Check("sum", bool(run.results) and all(r["sum"] == expected for r in run.results.values()))]
"""

# Each test its own state folder: under xdist this file's tests run on several workers at once, and a shared one
# would let another worker's run move `runs/latest` between a test's run and its check of it.
pytestmark = pytest.mark.usefixtures("own_lab_home")

SLEEPER = """
import os, time, labkit
rank = labkit.node_rank()
if rank == 1:
    open(os.path.join(labkit.work_dir(), "ready"), "w").close()
    time.sleep(600)
labkit.write_result(rank, done=True)
"""


def host_nodes(transport, nnodes: int = 2) -> Target:
    """`nnodes` nodes that are process groups on this host, as `lab run --on host` makes them."""
    return Target(transport, ("localhost",) * nnodes, "local")


class Collect:
    def __init__(self):
        self.lines, self.events = [], []

    def line(self, node, text):
        self.lines.append((node, text))

    def event(self, text):
        self.events.append(text)


def exercise(tmp_path: Path, manifest: str, program: str = JOIN, check: str = CHECK):
    root = tmp_path / "exercises"
    folder = root / "exercise01_join"
    folder.mkdir(parents=True)
    shutil.copy(exercises_root() / "labkit.py", root / "labkit.py")
    (folder / "exercise.yaml").write_text(manifest)
    (folder / "prog.py").write_text(program)
    (folder / "check.py").write_text(check)
    return load_exercise(folder), LocalTransport(tmp_path / "shared", root)


def test_pass_streams_and_records(tmp_path):
    ex, transport = exercise(tmp_path, "program: prog.py\ntimeout: 60\n")
    reporter = Collect()
    record = run_exercise(ex, host_nodes(transport), RunOptions(), reporter)
    assert record.passed, record.checks
    assert {node for node, text in reporter.lines if "sum=1.0" in text} == {0, 1}
    saved = json.loads((record.path / "run.json").read_text())
    assert saved["status"] == "passed" and saved["steps"][0]["exit_codes"] == {"0": 0, "1": 0}
    assert (record.path / "results" / "main" / "rank1.json").is_file()
    assert "sum=" in (record.path / "logs" / "node0-main.log").read_text()
    assert (paths.runs_dir() / "latest").resolve() == record.path.resolve()


def test_nonzero_exit_fails_the_run_but_keeps_a_record(tmp_path):
    ex, transport = exercise(tmp_path, "program: prog.py\nargs: [--fail]\ntimeout: 60\n")
    # No early stop: on a loaded machine the other node may still be writing its result 10 s after the first exited.
    record = run_exercise(ex, host_nodes(transport), RunOptions(fail_grace=None), Collect())
    assert not record.passed
    failed = [c for c in record.checks if not c.passed]
    assert [c.name for c in failed] == ["main: every node exited 0"]
    assert json.loads((record.path / "run.json").read_text())["status"] == "failed"


def test_hung_rendezvous_times_out_names_missing_ranks_and_kills(tmp_path):
    ex, transport = exercise(tmp_path, "program: prog.py\nargs: [--hang]\ntimeout: 6\n")
    reporter = Collect()
    record = run_exercise(ex, host_nodes(transport), RunOptions(), reporter)
    assert not record.passed and record.steps[0].timed_out
    timeout_events = [e for e in reporter.events if "timed out" in e]
    assert timeout_events and "ranks that never reported: 0, 1" in timeout_events[0]
    assert transport.kill(1, record.run_id) == 0  # nothing of the run is left to kill


def test_fault_kills_the_named_node_once_the_trigger_file_appears(tmp_path):
    manifest = ("program: prog.py\ntimeout: 60\nsteps:\n  - name: main\n"
                "    fault: {when_file: ready, action: kill-node, node: 1}\n")
    check = "from lab.jobs.checks import Check\ndef check(run):\n    return [Check('node1 killed', run.last.exit_codes[1] != 0)]\n"
    ex, transport = exercise(tmp_path, manifest, SLEEPER, check)
    reporter = Collect()
    record = run_exercise(ex, host_nodes(transport), RunOptions(), reporter)
    assert not record.steps[0].timed_out
    assert any("fault: kill-node on node1" in e for e in reporter.events)
    assert record.steps[0].exit_codes[0] == 0 and record.steps[0].exit_codes[1] != 0
    assert record.steps[0].fault_injected


def test_expected_failure_step_and_checker_crash(tmp_path):
    manifest = "program: prog.py\ntimeout: 60\nsteps:\n  - name: broken\n    args: [--fail]\n    expect: fail\n"
    crash = "def check(run):\n    return [1 / 0]\n"
    ex, transport = exercise(tmp_path, manifest, check=crash)
    record = run_exercise(ex, host_nodes(transport), RunOptions(), Collect())
    assert [c.name for c in record.checks] == ["checker ran"]
    assert "ZeroDivisionError" in record.checks[0].detail
    assert record.status == "failed"
