"""Commands at the same time on one lab: `lab up` twice, `lab run` twice, `lab down` under a run."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from lab import paths
from lab.locks import try_lock

from .conftest import lab, lab_json, labelled

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def start_lab(*args):
    return subprocess.Popen([sys.executable, "-m", "lab.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_until(condition, what, seconds=300):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def taken_by(lock_file, process):
    """True once `process` took the lock on `lock_file` (its holder writes its pid in it); looks without locking."""
    try:
        return json.loads(lock_file.read_text())["pid"] == process.pid
    except (OSError, ValueError, KeyError):
        return False


def held(lock_file):
    """True while some process holds the flock on `lock_file` (asks for it: only where nobody else may race)."""
    lock = try_lock(lock_file)
    if lock is not None:
        lock.release()
    return lock is None


def test_two_ups_of_one_lab_one_wins_the_other_is_told_and_nothing_is_duplicated(client, fresh_name):
    lock_file = paths.state_dir() / "locks" / f"{fresh_name}.lock"
    first = start_lab("up", "--nodes", "2", "--name", fresh_name)
    wait_until(lambda: taken_by(lock_file, first), "the first `lab up` took the lab")
    os.kill(first.pid, signal.SIGSTOP)  # frozen while it holds the lab: the second surely comes while it changes it
    try:
        second = lab("up", "--nodes", "2", "--name", fresh_name)
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert second.returncode == 5
    error, hint = second.stderr.strip().splitlines()
    assert error == f"error: lab '{fresh_name}' is being changed by pid {first.pid} (`lab up --nodes 2 --name {fresh_name}`)"
    assert hint.startswith("hint: wait for that command to finish")
    _, stderr = first.communicate(timeout=600)
    assert first.returncode == 0, stderr
    containers, networks, volumes = labelled(client, fresh_name)
    assert (len(containers), len(networks), len(volumes)) == (2, 1, 1)


def test_a_lab_command_that_dies_holding_the_lab_lets_it_go(client, fresh_name):
    lock_file = paths.state_dir() / "locks" / f"{fresh_name}.lock"
    first = start_lab("up", "--nodes", "2", "--name", fresh_name)
    wait_until(lambda: taken_by(lock_file, first), "the first `lab up` took the lab")
    assert held(lock_file)
    first.kill()  # SIGKILL: no clean-up of its own runs
    first.wait()
    assert not held(lock_file)
    nodes = lab_json("up", "--nodes", "2", "--name", fresh_name)["nodes"]
    assert [node["state"] for node in nodes] == ["running", "running"]
    assert len(labelled(client, fresh_name)[0]) == 2


def test_ups_started_together_never_duplicate_a_lab(client, fresh_name):
    ups = [start_lab("up", "--nodes", "2", "--name", fresh_name) for _ in range(3)]
    results = [(process.returncode, stderr) for process in ups for _, stderr in [process.communicate(timeout=600)]]
    assert any(code == 0 for code, _ in results), results
    for code, stderr in results:
        assert code == 0 or (code == 5 and f"lab '{fresh_name}' is being changed by pid" in stderr), (code, stderr)
    containers, networks, volumes = labelled(client, fresh_name)
    assert (len(containers), len(networks), len(volumes)) == (2, 1, 1)


def rendezvous_port(record):
    """The port exercise01's ranks joined on, from node0's log in the run's record."""
    log = (paths.runs_dir() / record["run_id"] / "logs" / "node0-main.log").read_text()
    return int(re.search(r"via node0:(\d+)", log).group(1))


def test_two_runs_at_once_on_one_lab_get_their_own_port_and_id_and_both_pass(two_nodes):
    ports = paths.lab_dir(two_nodes) / "ports"
    first = start_lab("run", "exercise01", "--name", two_nodes, "--timeout", "600", "--json")
    # The second starts once the first holds its port and before it ends: it probes while the first's is still free.
    wait_until(lambda: any(taken_by(path, first) for path in ports.glob("*.lock")), "the first run's port")
    second = start_lab("run", "exercise01", "--name", two_nodes, "--timeout", "600", "--json")
    outputs = [process.communicate(timeout=900) for process in (first, second)]
    assert [process.returncode for process in (first, second)] == [0, 0], outputs
    records = [json.loads(stdout)[0] for stdout, _ in outputs]
    assert [record["status"] for record in records] == ["passed", "passed"]
    assert records[0]["run_id"] != records[1]["run_id"]
    assert rendezvous_port(records[0]) == 29500 and rendezvous_port(records[1]) != 29500


def test_down_during_a_run_ends_it_with_a_record_that_says_so(client, fresh_name):
    lab_json("up", "--nodes", "2", "--name", fresh_name)
    run = start_lab("run", "exercise03", "--name", fresh_name, "--json")
    node0 = client.containers.get(f"lab-{fresh_name}-node0")
    wait_until(lambda: "torch.distributed.run" in node0.exec_run(["ps", "-eo", "args"]).output.decode(),
               "the run's torchrun on node0")
    down = lab("down", "--name", fresh_name)  # a run in progress does not hold the lab
    assert down.returncode == 0, down.stderr
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 5, stderr
    assert f"error: lab '{fresh_name}' was taken down during the run (`lab down` removed its nodes)" in \
        stderr.splitlines()
    [record] = [json.loads(path.read_text()) for path in paths.runs_dir().glob("*-exercise03/run.json")
                if json.loads(path.read_text())["lab"] == fresh_name]
    assert record["status"] == "error" and "was taken down during the run" in record["error"]
    assert labelled(client, fresh_name) == ([], [], [])


def test_jobs_spread_exercises_over_the_lab_and_a_copy_that_is_gone_after(client, fresh_name):
    lab_json("up", "--nodes", "2", "--name", fresh_name)
    # exercise03 (about 10 s) goes first, to the lab; the copy is up long before it ends and takes exercise01.
    result = lab("run", "3", "1", "--jobs", "2", "--name", fresh_name, "--json", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(result.stdout)
    assert [(r["exercise"], r["status"]) for r in records] == [("exercise03", "passed"), ("exercise01", "passed")]
    copy = f"{fresh_name}-copy1"
    assert [r["lab"] for r in records] == [fresh_name, copy], result.stderr
    assert f"[{copy}] exercise" in result.stderr and f"running 2 exercises 2 at a time, on lab '{fresh_name}'" in result.stderr
    assert labelled(client, copy) == ([], [], []) and lab_json("status", "--name", fresh_name)
