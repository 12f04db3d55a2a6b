"""Faults that end by themselves: the timer outlives the `lab` that set it; `lab fault clear` is idempotent."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..unit.test_cli_errors import assert_one_line_error
from .conftest import lab, lab_json
from .test_reliability import wait_for

pytestmark = pytest.mark.docker


def node_faults(name):
    return {node["index"]: node["faults"] for node in lab_json("status", "--name", name)[name]["nodes"]}


def timer_processes(name):
    """Host processes of lab `name`'s fault timers."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"lab.nodes.fault_timer" in argv and name.encode() in argv:
            found.append(int(pid))
    return found


def test_timed_partition_ends_by_itself_after_lab_is_killed(fresh_name):
    lab("up", "--nodes", "2", "--name", fresh_name, check=True)
    setter = subprocess.Popen([sys.executable, "-m", "lab.cli", "fault", "partition", "node1", "--for", "5s",
                               "--name", fresh_name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    wait_for(lambda: "partitioned" in node_faults(fresh_name)[1], what="node1 to be partitioned")
    try:
        os.killpg(setter.pid, signal.SIGKILL)  # `lab` and anything in its process group die at once
    except ProcessLookupError:
        pass  # it had returned already, as it does at once
    setter.wait(30)
    assert any(fault.startswith("partition for") for fault in node_faults(fresh_name)[1])
    wait_for(lambda: node_faults(fresh_name)[1] == [], seconds=90, what="node1's partition to end by itself")
    reach = lab("exec", "--name", fresh_name, "--node", "0", "--", "python", "-c",
                "import socket; socket.create_connection(('node1', 22), timeout=10); print('reached node1')")
    assert reach.returncode == 0 and "reached node1" in reach.stdout, reach.stderr
    assert timer_processes(fresh_name) == []


def test_clear_heals_and_cancels_timers_and_twice_is_fine(fresh_name):
    lab("up", "--nodes", "2", "--name", fresh_name, check=True)
    lab("fault", "pause", "node0", "--for", "10m", "--name", fresh_name, check=True)
    lab("fault", "partition", "node1", "--name", fresh_name, check=True)
    assert timer_processes(fresh_name)
    first = lab("fault", "clear", "--name", fresh_name, check=True)
    assert "node0: healed paused; 1 timer(s) cancelled" in first.stdout
    assert "node1: healed partitioned" in first.stdout
    second = lab("fault", "clear", "--name", fresh_name, check=True)
    assert "nothing to clear" in second.stdout
    assert node_faults(fresh_name) == {0: [], 1: []}
    wait_for(lambda: timer_processes(fresh_name) == [], seconds=30, what="the cancelled timer to end")


def test_delay_without_netem_is_one_line(fresh_name):
    """This project's CI kernel has no netem: the delay fails with one line saying so (and works where it has)."""
    lab("up", "--nodes", "1", "--net-admin", "--name", fresh_name, check=True)
    result = lab("fault", "delay", "node0", "--ms", "20", "--name", fresh_name)
    if result.returncode == 0:
        assert "delay 20ms" in " ".join(node_faults(fresh_name)[0])
        lab("fault", "clear", "node0", "--name", fresh_name, check=True)
        assert node_faults(fresh_name)[0] == []
    else:
        assert_one_line_error(result, 5, "kernel has no netem")


def test_a_fault_set_by_hand_during_a_run_is_in_its_record_and_on_its_timeline(two_nodes):
    run = subprocess.Popen([sys.executable, "-m", "lab.cli", "exec", "--name", two_nodes, "--all", "--", "python", "-c",
                            "import time; time.sleep(12)"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)  # the run has launched on both nodes
    lab("fault", "pause", "node1", "--for", "2s", "--name", two_nodes, check=True)
    stdout, stderr = run.communicate(timeout=120)
    assert run.returncode == 0, stderr
    record = Path(re.search(r"record: (\S+)", stdout)[1])
    step = json.loads((record / "run.json").read_text())["steps"][0]
    assert [(fault["node"], fault["action"]) for fault in step["hand_faults"]] == [(1, "pause for 2s"),
                                                                                   (1, "pause ended")]
    assert step["started_at"] < step["hand_faults"][0]["at"] < step["hand_faults"][1]["at"]
    shown = lab("show", record.name, check=True).stdout  # the timeline is drawn when the run is looked at
    assert f"timeline: {record / 'timeline.png'}" in shown
    assert (record / "timeline.png").read_bytes()[:4] == b"\x89PNG"
    assert node_faults(two_nodes)[1] == []
