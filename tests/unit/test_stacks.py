"""Where each rank waits, from real py-spy dumps of hung processes (tests/unit/stack_samples/, trimmed), and the
capture around it: roles and ranks, the files it writes, nodes it cannot read, and the /proc scan and py-spy on
real processes of this host."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.analysis.stacks import ProcessStack, capture_stacks, load_stacks, process_stack, save_by_run, threads_from_py_spy
from lab.nodes.processes import (JobProcess, StacksUnavailable, dump_with_py_spy, host_processes, remote_script,
                                 scan_processes)

SAMPLES = Path(__file__).parent / "stack_samples"
# Samples: `lab exec`/`docker exec` of scripts where one rank skips the collective, torchrun (static and c10d),
# torch.multiprocessing.spawn, taken with `py-spy dump --json --locals` from the host on torch 2.13 in lab nodes.
WHERE = {
    "all_gather": "all_gather (ops.py:18)",
    "barrier": "barrier (ops.py:14)",
    "broadcast": "broadcast (ops.py:16)",
    "recv": "recv (ops.py:20)",
    "ddp": "DistributedDataParallel -> _verify_param_shape_across_processes (ops.py:22)",
    "init_tcpstore_client": "init_process_group -> TCPStore connect node0:45491 (hang.py:6)",
    "init_tcpstore_server": "init_process_group -> TCPStore server node0:29600 waiting for 2 ranks to connect (hang.py:6)",
    "init_gloo_connect": "init_process_group -> gloo connecting to the other ranks (ops.py:7)",
    "spawn_parent": "spawn -> waiting for its spawned processes (spawn.py:12)",
    "spawn_child_server": "init_process_group -> TCPStore server node0:29901 waiting for 3 ranks to connect (spawn.py:7)",
    "spawn_child_gloo": "init_process_group -> gloo connecting to the other ranks (spawn.py:7)",
    "thread_all_reduce": "all_reduce [thread reducer]",
    "torchrun_worker_all_reduce": "all_reduce (hang_tr.py:8)",
    "torchrun_worker_sleeping": "not in a distributed call (hang_tr.py:7)",
    "torchrun_agent_static_monitoring": "torch.distributed.run -> monitoring its workers",
    "torchrun_agent_static_rendezvous": "torch.distributed.run -> rendezvous: waiting for the other nodes",
    "torchrun_agent_c10d_rendezvous": "torch.distributed.run -> rendezvous: waiting for the other nodes",
}
AGENT_CMD = ["/opt/lab-venv/bin/python", "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=2", "train.py"]


def sample(name: str) -> list[dict]:
    return json.loads((SAMPLES / f"{name}.json").read_text())


def job_process(pid=100, ppid=1, node=1, cmdline=("python", "train.py"), **env) -> JobProcess:
    return JobProcess(node, pid, ppid, list(cmdline), {"LAB_RUN_ID": "run1", "LAB_NODE": str(node), **env})


def test_every_sample_has_an_expectation():
    assert sorted(path.stem for path in SAMPLES.glob("*.json")) == sorted(WHERE)


@pytest.mark.parametrize("name", sorted(WHERE))
def test_where_it_waits(name):
    process = job_process()
    assert str(process_stack(process, sample(name), [process]).waiting()) == WHERE[name]


def test_frames_are_innermost_last_and_keep_torch_locals_only():
    main = threads_from_py_spy(sample("init_tcpstore_client"))[0]
    assert [main.frames[0].function, main.frames[-1].function] == ["<module>", "_create_c10d_store"]
    assert main.frames[-1].locals["port"] == "45491"
    assert main.frames[0].locals == {}  # the user's own frame: no values of theirs are stored


def test_the_thread_in_a_distributed_call_is_the_one_named():
    stack = process_stack(job_process(), sample("thread_all_reduce"), [])
    assert [thread.name for thread in stack.threads] == ["MainThread", "reducer"]
    assert stack.waiting().thread == "reducer" and stack.waiting().call == "all_reduce"


def test_torchrun_worker_rank_from_its_environment():
    worker = job_process(pid=12, ppid=10, RANK="2", LOCAL_RANK="0", WORLD_SIZE="4", MASTER_ADDR="node0",
                         MASTER_PORT="29500", TORCHELASTIC_RUN_ID="none", NODE_RANK="1", SECRET_TOKEN="x")
    agent = job_process(pid=10, cmdline=AGENT_CMD, NODE_RANK="1")
    stack = process_stack(worker, sample("torchrun_worker_all_reduce"), [agent, worker])
    assert (stack.role, stack.rank, stack.local_rank, stack.node) == ("worker", 2, 0, 1)
    assert stack.summary() == "rank 2 node1: all_reduce (hang_tr.py:8)"
    assert stack.env == {"RANK": "2", "LOCAL_RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "node0",
                         "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none"}


def test_torchrun_agent_is_told_from_its_workers():
    agent = job_process(pid=10, cmdline=AGENT_CMD, NODE_RANK="1")
    worker = job_process(pid=12, ppid=10, RANK="2", LOCAL_RANK="0")
    stack = process_stack(agent, sample("torchrun_agent_static_monitoring"), [agent, worker])
    assert (stack.role, stack.rank) == ("agent", None)
    assert stack.summary() == "agent node1 pid 10: torch.distributed.run -> monitoring its workers"
    assert process_stack(job_process(cmdline=["/usr/local/bin/torchrun", "x.py"]), [], []).role == "agent"


def test_lab_exec_process_is_the_rank_of_its_node():
    """`lab exec`: one process per node, no RANK in its environment, rank = NODE_RANK, also before any torch call."""
    process = job_process(NODE_RANK="1", NNODES="2")
    stack = process_stack(process, sample("torchrun_worker_sleeping"), [process])
    assert (stack.role, stack.rank) == ("worker", 1)
    assert stack.summary() == "rank 1 node1: not in a distributed call (hang_tr.py:7)"


def test_spawning_parent_is_no_rank_and_its_children_are_placed_from_their_stacks():
    parent = job_process(pid=10, NODE_RANK="0")
    children = [job_process(pid=11, ppid=10, NODE_RANK="0"), job_process(pid=12, ppid=10, NODE_RANK="0")]
    everyone = [parent, *children]
    assert (process_stack(parent, sample("spawn_parent"), everyone).role,
            process_stack(parent, sample("spawn_parent"), everyone).rank) == ("process", None)
    server = process_stack(children[0], sample("spawn_child_server"), everyone)
    gloo = process_stack(children[1], sample("spawn_child_gloo"), everyone)
    assert [(server.role, server.rank, server.local_rank), (gloo.role, gloo.rank, gloo.local_rank)] == \
        [("worker", 0, 0), ("worker", 1, 1)]


def test_process_without_a_stack_says_why():
    stack = process_stack(job_process(cmdline=["timeout", "300", "python", "x.py"]),
                          "Failed to find python version from target process", [])
    assert stack.summary() == "process node1 pid 100: no stack (Failed to find python version from target process)"


class FakeTransport:
    """Node 0 runs a torchrun agent and its two workers; node 1 cannot be read."""

    def __init__(self):
        self.asked = []

    def processes(self, index, run_id):
        self.asked.append((index, run_id))
        if index == 1:
            raise StacksUnavailable("node1 is not running")
        return [job_process(pid=10, node=0, cmdline=AGENT_CMD),
                job_process(pid=12, ppid=10, node=0, RANK="1", LOCAL_RANK="1"),
                job_process(pid=11, ppid=10, node=0, RANK="0", LOCAL_RANK="0")]

    def dump_stacks(self, index, pids):
        dumps = {10: "torchrun_agent_static_monitoring", 11: "torchrun_worker_all_reduce", 12: "torchrun_worker_sleeping"}
        return {pid: sample(dumps[pid]) for pid in pids}


def test_capture_writes_readable_files_json_and_summary(tmp_path):
    transport = FakeTransport()
    stacks = capture_stacks(transport, "run1", tmp_path / "stacks", [0, 1])
    assert transport.asked == [(0, "run1"), (1, "run1")]
    assert [stack.summary() for stack in stacks] == [
        "rank 0 node0: all_reduce (hang_tr.py:8)",
        "rank 1 node0: not in a distributed call (hang_tr.py:7)",
        "agent node0 pid 10: torch.distributed.run -> monitoring its workers",
        "node1: stacks unavailable: node1 is not running",
    ]
    files = sorted(path.name for path in (tmp_path / "stacks").iterdir())
    assert files == ["node0-10.txt", "node0-11.txt", "node0-12.txt", "stacks.json", "summary.txt"]
    text = (tmp_path / "stacks" / "node0-11.txt").read_text()
    assert "summary: rank 0 node0: all_reduce (hang_tr.py:8)" in text
    assert text.index("<module> (") < text.index("all_reduce (/opt/lab-venv")  # most recent call last
    assert (tmp_path / "stacks" / "summary.txt").read_text().splitlines()[0] == "rank 0 node0: all_reduce (hang_tr.py:8)"
    reloaded = load_stacks(tmp_path / "stacks")
    assert [stack.summary() for stack in reloaded] == [stack.summary() for stack in stacks]
    assert reloaded[0].threads == stacks[0].threads


def test_save_by_run_puts_each_run_in_its_own_record(own_lab_home):
    from lab import paths

    exercise = paths.runs_dir() / "20260101-000000-000-exercise03"
    exercise.mkdir(parents=True)
    step = process_stack(job_process(RANK="0", LAB_RUN_ID="20260101-000000-000-exercise03-main"), [], [])
    stranger = process_stack(job_process(RANK="0", LAB_RUN_ID="20250101-000000-000-exec"), [], [])
    unreadable = ProcessStack(1, None, "process", None, None, {}, error="node1 is not running")
    saved = save_by_run([step, stranger, unreadable])
    assert saved == {"20260101-000000-000-exercise03-main": exercise / "stacks"}
    assert [stack.error for stack in load_stacks(exercise / "stacks")] == [step.error, "node1 is not running"]


RUN = f"unit-stacks{os.getpid()}"  # one run id per test process: xdist's workers run these tests at once


@pytest.fixture
def job_on_this_host():
    """A real process of run RUN on node 3 of this host, waiting in time.sleep."""
    env = {**os.environ, "LAB_RUN_ID": f"{RUN}-main", "LAB_NODE": "3", "RANK": "5", "HOME_SECRET": "x"}
    process = subprocess.Popen([sys.executable, "-c", "import time\nprint('ready', flush=True)\ntime.sleep(120)"],
                               env=env, stdout=subprocess.PIPE)
    process.stdout.readline()
    yield process
    process.kill()
    process.wait()


def test_scan_finds_a_run_by_id_node_and_step(job_on_this_host):
    [found] = host_processes(RUN, 3)
    assert (found.pid, found.ppid, found.env["RANK"]) == (job_on_this_host.pid, os.getpid(), "5")
    assert "HOME_SECRET" not in found.env
    assert host_processes(RUN, 2) == [] and host_processes(f"{RUN}-other", 3) == []
    assert any(process.pid == job_on_this_host.pid for process in host_processes("", 3))


def test_remote_script_runs_the_same_scan_elsewhere(job_on_this_host):
    output = subprocess.run([sys.executable, "-c", remote_script(scan_processes, RUN, "3")],
                            capture_output=True, text=True, check=True).stdout
    assert [process["pid"] for process in json.loads(output)] == [job_on_this_host.pid]


@pytest.mark.skipif(os.geteuid() != 0 or not (shutil.which("py-spy") or (Path(sys.executable).parent / "py-spy").exists()),
                    reason="py-spy attaches as root")
def test_py_spy_reads_a_real_process(job_on_this_host):
    time.sleep(0.2)
    dumps = dump_with_py_spy([job_on_this_host.pid, os.getpid() * 1000 + 7])
    [main] = threads_from_py_spy(dumps[str(job_on_this_host.pid)])
    assert (main.name, main.frames[-1].function, main.frames[-1].line) == ("MainThread", "<module>", 3)
    assert isinstance(dumps[str(os.getpid() * 1000 + 7)], str)  # no such process: a reason, not an exception


def test_py_spy_failure_is_a_one_line_reason(job_on_this_host, tmp_path):
    failing = str(tmp_path / "py-spy")
    Path(failing).write_text("#!/bin/sh\necho 'Error: Permission denied (os error 13)' >&2\nexit 1\n")
    Path(failing).chmod(0o755)
    assert dump_with_py_spy([job_on_this_host.pid], failing) == {str(job_on_this_host.pid): "Permission denied (os error 13)"}
