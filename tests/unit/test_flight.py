"""The jobs' sitecustomize writes torch's Flight Recorder (exercises/jobhooks/): real gloo processes on this host,
as a run's processes start on a node (PYTHONPATH, LAB_FLIGHT_DIR, LAB_NODE), read back by lab/analysis/flight.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from lab.analysis.flight import load_traces
from lab.analysis.stacks import stacks_at_termination
from lab.jobs.exercises import JOB_HOOKS_DIR, exercises_root
from lab.jobs.flight import FlightRecording

JOB = """import os, sys, time, datetime, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=int(sys.argv[2]), world_size=2,
                        timeout=datetime.timedelta(seconds=60))
for step in range(int(sys.argv[3])):
    dist.all_reduce(torch.ones(4))
print("done", flush=True)
time.sleep(float(sys.argv[4]))
dist.destroy_process_group()  # without it gloo's threads may abort the exit (SIGABRT), the recorder or not
if len(sys.argv) > 5:
    raise RuntimeError(sys.argv[5])
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(tmp_path: Path, rank: int, port: int, collectives: int, linger: float = 0,
          env_rank: bool = False, fail: str | None = None) -> subprocess.Popen:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight"),
           "LAB_NODE": str(rank), **({"RANK": str(rank), "WORLD_SIZE": "2"} if env_rank else {})}
    return subprocess.Popen([sys.executable, str(script), str(port), str(rank), str(collectives), str(linger),
                             *([fail] if fail else [])], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_each_process_writes_its_collectives_when_it_ends(tmp_path):
    before = time.time()
    port = free_port()
    processes = [start(tmp_path, rank, port, 3, linger=1) for rank in (0, 1)]  # the hook looks every 0.25 s
    assert [process.wait(timeout=120) for process in processes] == [0, 0], [p.stdout.read() for p in processes]
    traces = load_traces(tmp_path / "flight")
    assert [(trace.rank, trace.node, trace.world_size, trace.reached, trace.live) for trace in traces] == [
        (0, 0, 2, 3, False), (1, 1, 2, 3, False)]
    assert str(traces[0].last) == "#3 all_reduce float[4]" and traces[0].waiting_in is None
    # when the process started and when it entered each collective, on this machine's clock, with the timeout
    history = traces[0].history
    assert [call.seq for call in history] == [1, 2, 3] and {call.timeout_s for call in history} == {60}
    assert before < traces[0].started_at < history[0].entered_at <= history[1].entered_at <= history[2].entered_at


def test_a_process_ended_by_an_exception_says_so_in_its_last_words(tmp_path):
    """What tells a rank that finished its work (and left early) from one that failed after the same collectives."""
    port = free_port()
    processes = [start(tmp_path, 0, port, 2, linger=1), start(tmp_path, 1, port, 2, linger=1, fail="bad label")]
    assert [process.wait(timeout=120) for process in processes] == [0, 1], [p.stdout.read() for p in processes]
    traces = load_traces(tmp_path / "flight")
    assert [(trace.rank, trace.exception, trace.ended_without_error) for trace in traces] == [
        (0, None, True), (1, "RuntimeError", False)]
    # what the condition of the `if` that raised compared, read in the frame as the process ended
    check = traces[1].failed_check
    assert (check.where, check.statement) == ("job.py:10", "len(sys.argv) > 5") and traces[0].failed_check is None
    assert check.operand("len(sys.argv)").number == 6 and check.operand("sys.argv").length == 6


CHECKED = """import os, sys, torch, torch.distributed
def tally(values):
    open(sys.argv[1], "w").close()  # a call a check makes is not made again by the hook
    return sum(values)
parts = [torch.ones(2, 3), torch.zeros(4)]
total = torch.tensor([6.0])
assert tally([1]) == 0 or int(total) == len(parts) * 2, "the parts do not add up"
"""


def test_a_failed_assert_keeps_the_values_it_compared_and_makes_no_call_of_the_jobs_own(tmp_path):
    (tmp_path / "checked.py").write_text(CHECKED)
    env = {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight"),
           "LAB_NODE": "0", "RANK": "0"}
    marker = tmp_path / "tallied"
    ended = subprocess.run([sys.executable, str(tmp_path / "checked.py"), str(marker)], env=env, capture_output=True,
                           text=True, timeout=120)
    assert ended.returncode == 1 and "the parts do not add up" in ended.stderr
    marker.unlink()  # the job's own call, once
    [trace] = load_traces(tmp_path / "flight")
    check = trace.failed_check
    assert check.where == "checked.py:7" and check.statement.startswith("tally([1]) == 0 or")
    assert check.operand("int(total)").number == 6 and check.operand("len(parts) * 2").number == 4
    assert check.operand("int(total) == len(parts) * 2").text == "False"
    parts = check.operand("parts")
    assert parts.length == 2 and [(item.shape, item.dtype) for item in parts.items] == [((2, 3), "float32"),
                                                                                        ((4,), "float32")]
    assert check.operand("total").number == 6 and check.operand("total").shape == (1,)
    assert check.operand("tally([1])") is None and not marker.exists()  # its own function is not called again


BUSY = """import time
def build_index():
    print("busy", flush=True)
    end = time.time() + 60
    while time.time() < end:
        sum(range(1000))
build_index()
"""


def test_a_rank_ended_by_sigterm_writes_where_it_was_and_one_that_ends_otherwise_leaves_nothing(tmp_path):
    """torchrun ends a node's other ranks with SIGTERM when one fails: each writes its stack as the signal comes."""
    (tmp_path / "busy.py").write_text(BUSY)
    env = {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight"),
           "LAB_NODE": "1", "RANK": "3", "LOCAL_RANK": "1"}
    busy = subprocess.Popen([sys.executable, str(tmp_path / "busy.py")], env=env, stdout=subprocess.PIPE, text=True)
    assert busy.stdout.readline().strip() == "busy"
    busy.terminate()
    assert busy.wait(timeout=30) == -signal.SIGTERM  # the signal still ends it as it would have
    subprocess.run([sys.executable, "-c", "print(1)"], env=env, check=True, capture_output=True)
    [stack] = stacks_at_termination(tmp_path / "flight")
    assert (stack.node, stack.rank, stack.local_rank, stack.pid) == (1, 3, 1, busy.pid)
    assert stack.waiting().user_frame.function == "build_index"
    assert [path.name for path in (tmp_path / "flight").iterdir()] == [f"term-node1-pid{busy.pid}.txt"]


def test_a_job_too_quick_for_the_hook_to_see_its_rank_takes_torchruns_rank(tmp_path):
    """Joined, reduced and destroyed the group before the hook's first look: the rank comes from RANK."""
    port = free_port()
    processes = [start(tmp_path, rank, port, 2, env_rank=True) for rank in (0, 1)]
    assert [process.wait(timeout=120) for process in processes] == [0, 0], [p.stdout.read() for p in processes]
    assert sorted(trace.rank for trace in load_traces(tmp_path / "flight")) == [0, 1]


def test_a_hung_process_writes_what_it_waits_in_when_the_lab_asks(tmp_path):
    """Rank 0 enters a third all_reduce that rank 1, alive and asleep after two, never joins: asked, both write."""
    port = free_port()
    processes = [start(tmp_path, 0, port, 3), start(tmp_path, 1, port, 2, linger=60)]
    try:
        deadline = time.monotonic() + 60
        while "done" not in (line := processes[1].stdout.readline()) and time.monotonic() < deadline:
            assert line, "rank 1 ended early"
        time.sleep(1.6)  # rank 0 is in its third all_reduce by now, for over a second: it wrote a pending snapshot
        recording = FlightRecording(str(tmp_path / "flight"), tmp_path / "flight")
        recording.dump_live()
        traces = {trace.rank: trace for trace in load_traces(tmp_path / "flight")}
        assert traces[0].live and str(traces[0].waiting_in) == "#3 all_reduce float[4]"
        assert traces[1].live and traces[1].waiting_in is None and traces[1].reached == 2
        recording.keep(tmp_path / "record" / "flight")
        kept = [path.name.split("-")[0] for path in (tmp_path / "record" / "flight").iterdir()]
        assert kept.count("live") == 2 and "pending" in kept  # and rank 1's, if its init waited a second for rank 0
        assert not (tmp_path / "flight").exists()
    finally:
        for process in processes:
            process.kill()
            process.wait()


def test_a_process_that_never_uses_torch_distributed_writes_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight")}
    result = subprocess.run([sys.executable, "-c", "import sys; print('torch' in sys.modules)"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.stdout == "False\n" and result.stderr == ""  # the hook imported no torch either
    assert not (tmp_path / "flight").exists()


def test_a_run_that_passed_keeps_no_recorders_and_one_that_did_not_keeps_them(tmp_path):
    shared = tmp_path / "shared" / "flight" / "run1"
    recording = FlightRecording("/lab/shared/flight/run1", shared)
    shared.mkdir(parents=True)
    (shared / "exit-node0-pid7.json").write_text("{}")
    recording.keep(None)
    assert not shared.exists()
    shared.mkdir(parents=True)
    (shared / "exit-node0-pid7.json").write_text("{}")
    recording.keep(tmp_path / "record" / "flight")
    assert [path.name for path in (tmp_path / "record" / "flight").iterdir()] == ["exit-node0-pid7.json"]
    assert recording.env({"A": "1"}) == {"A": "1", "LAB_FLIGHT_DIR": "/lab/shared/flight/run1"}



def _dump(reason: str, seqs: range, pending: int | None = None) -> dict:
    entries = [{"collective_seq_id": seq, "profiling_name": "gloo:all_reduce", "input_sizes": [[4]],
                "input_dtypes": ["Float"], "retired": seq != pending, "time_created_ns": seq * 10**9,
                "timeout_ms": 5000} for seq in seqs]
    return {"node": "0", "pid": 7, "rank": 0, "world_size": 2, "reason": reason, "time": 9.0, "started": 0.5,
            "trace": {"entries": entries, "pg_status": {"0": {"last_enqueued_collective": str(seqs[-1])}}}}


def test_a_process_asked_while_it_hung_and_ended_later_keeps_the_collectives_of_both_dumps(tmp_path):
    """The live dump says what it waited in; the collectives it entered after that are only in its last words."""
    (tmp_path / "live-node0-pid7.json").write_text(json.dumps(_dump("live", range(1, 3), pending=2)))
    (tmp_path / "exit-node0-pid7.json").write_text(json.dumps(_dump("exit", range(1, 4))))
    [trace] = load_traces(tmp_path)
    assert trace.live and str(trace.waiting_in) == "#2 all_reduce float[4]" and trace.started_at == 0.5
    assert [(call.seq, call.entered_at, call.timeout_s) for call in trace.history] == [(1, 1, 5), (2, 2, 5), (3, 3, 5)]


def test_a_snapshot_written_while_the_process_ended_does_not_outrank_its_last_words(tmp_path):
    """The watcher thread can write a pending snapshot while atexit writes the exit dump, its clock a little later:
    the exit dump still says how the process ended (CI, 2026-11-27: a rank that raised read as one still at work)."""
    ended = {**_dump("exit", range(1, 3)), "exception": "RuntimeError", "error": "RuntimeError: timed out"}
    (tmp_path / "exit-node0-pid7.json").write_text(json.dumps(ended))
    (tmp_path / "pending-node0-pid7.json").write_text(json.dumps({**_dump("pending", range(1, 3), pending=2),
                                                                  "time": 9.5}))
    [trace] = load_traces(tmp_path)
    assert (trace.live, trace.exception, trace.waiting_in) == (False, "RuntimeError", None)


SEEDED = """import numpy as np, torch.distributed
def seed_for(rank):
    seed = 2718281828 * (rank + 1)
    np.random.seed(seed)
seed_for(1)
"""


def test_a_failure_inside_a_compiled_extension_keeps_the_statement_of_the_users_own_file(tmp_path):
    """numpy's seed() raises in mtrand.pyx, a frame whose source is not shipped: the statement kept is the user's."""
    (tmp_path / "seeded.py").write_text(SEEDED)
    env = {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight"),
           "LAB_NODE": "0", "RANK": "1"}
    ended = subprocess.run([sys.executable, str(tmp_path / "seeded.py")], env=env, capture_output=True, text=True,
                           timeout=120)
    assert ended.returncode == 1 and "Seed must be between" in ended.stderr
    [trace] = load_traces(tmp_path / "flight")
    assert trace.failed_check.where == "seeded.py:4" and trace.failed_check.operand("seed").number == 5436563656
