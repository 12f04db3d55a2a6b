"""The jobs' sitecustomize records each process's torch.distributed calls and store operations (exercises/jobhooks/):
real gloo processes on this host, as a run's processes start on a node (PYTHONPATH, LAB_FLIGHT_DIR, LAB_NODE), read
back by lab/analysis/flight.py and lab/analysis/calls.py."""

import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from lab.analysis.calls import DistCall, StoreOp, Tensor, read_calls
from lab.analysis.diagnosis import Evidence, NodeEvidence, diagnose
from lab.analysis.flight import load_traces
from lab.jobs.exercises import JOB_HOOKS_DIR, exercises_root
from tests.unit.test_flight import free_port

SLOW = pytest.mark.slow  # starts Pythons that import torch: 6-20 s on 2 busy cores

# Both ranks meet at a file barrier once torch is imported (not through a store, which the hooks would record): on
# busy cores one rank's import can outlast the other's short process-group timeout, which covers joining too.
INIT = """import datetime, os, sys, time, torch, torch.distributed as dist
rank = int(sys.argv[2]); arrived = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arrived-")
os.close(os.open(arrived + str(rank), os.O_CREAT | os.O_WRONLY)); deadline = time.monotonic() + 120
while not os.path.exists(arrived + str(1 - rank)) and time.monotonic() < deadline: time.sleep(0.01)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=float(sys.argv[3])))
"""


def hook_env(tmp_path: Path, node: int, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(exercises_root() / JOB_HOOKS_DIR), "LAB_FLIGHT_DIR": str(tmp_path / "flight"),
            "LAB_NODE": str(node), **extra}


def start_ranks(tmp_path: Path, body: str, timeout: float = 2, hooked: bool = True) -> list[subprocess.Popen]:
    """Two ranks of `INIT + body` (job.py) with a process group timeout, each as its own process like on its own
    node (without the hook: as Python runs them)."""
    (tmp_path / "job.py").write_text(INIT + body)
    port = free_port()
    return [subprocess.Popen([sys.executable, str(tmp_path / "job.py"), str(port), str(rank), str(timeout)],
                             env=hook_env(tmp_path, rank) if hooked else os.environ, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
            for rank in (0, 1)]


def run_ranks(tmp_path: Path, body: str, timeout: float = 2, hooked: bool = True) -> list[subprocess.CompletedProcess]:
    """Two ranks of `body` run to their ends."""
    processes = start_ranks(tmp_path, body, timeout, hooked)
    try:
        return [subprocess.CompletedProcess(process.args, process.wait(timeout=120), process.stdout.read())
                for process in processes]
    finally:
        for process in processes:
            process.kill()


def node_log(rank: int, done: subprocess.CompletedProcess) -> list[str]:
    """A rank's output as its node's log. Both "nodes" run on this host: a line about connecting to 127.0.0.1 under
    load (a retry, a client timeout) is this test's own doing (a lab's nodes have addresses of their own), so it is
    left out; it read as a script that points a multi-node job at loopback (the suite under load, 2026-11-26)."""
    return [f"[rank{rank}]:{line}" for line in done.stdout.splitlines()
            if not ("127.0.0.1" in line and "connect" in line.lower())]


def dumps(tmp_path: Path, reason: str) -> dict[int, dict]:
    """The dumps of one reason, by rank."""
    found = {}
    for path in (tmp_path / "flight").glob(f"{reason}-*.json"):
        data = json.loads(path.read_text())
        found[data["rank"]] = data
    return found


@SLOW
def test_ranks_that_both_receive_from_each_other_leave_the_recv_its_peer_and_a_snapshot_taken_while_they_waited(
        tmp_path):
    """Only send/recv, which the Flight Recorder does not keep: the dumps are written for the calls alone."""
    # 4 s: the watcher writes its snapshot a second into the wait, which a loaded machine can delay by seconds
    ended = run_ranks(tmp_path, "dist.recv(torch.zeros(4), src=1 - rank, tag=7)\n", timeout=4)
    assert [end.returncode for end in ended] == [1, 1]
    traces = {trace.rank: trace for trace in load_traces(tmp_path / "flight")}
    assert sorted(traces) == [0, 1]
    for rank, trace in traces.items():
        assert (trace.reached, trace.last, trace.live, trace.exception) == (0, None, False, "RuntimeError")
        [recv] = trace.calls.failed
        assert str(recv) == f"recv(float32[4], src={1 - rank}, tag=7) at job.py:7 in <module>"
        # the first to time out says so; the other may learn first that its peer's connection closed
        assert recv.timeout_s == 4 and recv.error.startswith("RuntimeError: ")
        assert trace.calls.blocked_in == recv and trace.calls.pending == ()
        assert [call.op for call in trace.calls.recent] == ["init_process_group"]
        assert trace.calls.counts == {"init_process_group": 1, "recv": 1}
    assert any("Timed out waiting 4000ms for recv" in trace.calls.failed[0].error for trace in traces.values())
    # written by the watcher a second into the wait: what a rank SIGKILLed there would have left (written again once
    # the recv raised, if the watcher ran once more before the process ended: then it holds the recv as failed)
    snapshots = dumps(tmp_path, "pending")
    assert sorted(snapshots) == [0, 1]
    for rank, data in snapshots.items():
        calls = read_calls(data["calls"])
        [recv] = calls.pending or calls.failed
        assert (recv.op, recv.src, data["trace"]["entries"]) == ("recv", 1 - rank, [])
        assert (recv.ended_at is None) is bool(calls.pending) and recv.entered_at + 1 <= data["time"]


@SLOW
def test_a_snapshot_is_written_again_once_the_call_it_caught_pending_returns(tmp_path):
    """Rank 0 waits 2 s in a recv, gets its data and sleeps: SIGKILLed then, it must not seem to wait in the recv."""
    processes = start_ranks(tmp_path, """if rank == 0:
    dist.recv(torch.zeros(1), src=1)
    print("received", flush=True)
    time.sleep(60)
else:
    time.sleep(2)
    dist.send(torch.zeros(1), dst=0)
""", timeout=30)
    try:
        assert processes[0].stdout.readline().strip() == "received"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            calls = read_calls(dumps(tmp_path, "pending").get(0, {}).get("calls"))
            if calls is not None and not calls.pending:
                break
            time.sleep(0.1)
    finally:
        for process in processes:
            process.kill()
            process.wait()
    [trace] = [trace for trace in load_traces(tmp_path / "flight") if trace.rank == 0]
    assert trace.live and trace.calls.pending == () and trace.calls.blocked_in is None
    assert [call.op for call in trace.calls.recent] == ["init_process_group", "recv"]


@SLOW
def test_a_broadcast_whose_ranks_name_different_roots_says_each_root(tmp_path):
    """mp.spawn children (a fresh interpreter each) record too, and `from torch import distributed` is the same
    module."""
    (tmp_path / "spawned.py").write_text(f"""import datetime, sys
import torch
import torch.multiprocessing as mp
from torch import distributed


def work(rank, port):
    distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{{port}}", rank=rank, world_size=2,
                                   timeout=datetime.timedelta(seconds=2))
    distributed.broadcast(torch.arange(3, dtype=torch.int64) * rank, src=rank)


if __name__ == "__main__":
    mp.spawn(work, args=({free_port()},), nprocs=2)
""")
    ended = subprocess.run([sys.executable, str(tmp_path / "spawned.py")], env=hook_env(tmp_path, 0),
                           capture_output=True, text=True, timeout=120)
    traces = load_traces(tmp_path / "flight")
    assert [trace.rank for trace in traces] == [0, 1], ended.stderr
    for rank, trace in enumerate(traces):
        [broadcast] = [call for call in trace.calls.recent + trace.calls.failed if call.op == "broadcast"]
        assert (broadcast.root, broadcast.tensors, broadcast.caller) == (
            rank, (Tensor((3,), "int64"),), "spawned.py:10 in work")
        assert trace.last.operation == "broadcast"  # the Flight Recorder's side of the same call


@SLOW
def test_new_group_with_different_members_per_rank_keeps_the_members_each_passed(tmp_path):
    """Rank 1 makes a group of itself and ends; rank 0 waits in new_group([0, 1]) for it past any timeout, until it
    is killed (SIGKILL, as the lab stops a hung run): its snapshot from a second into the wait is what is left."""
    processes = start_ranks(tmp_path, "group = dist.new_group([0, 1] if rank == 0 else [1])\n")
    try:
        assert processes[1].wait(timeout=120) == 0
        deadline = time.monotonic() + 60
        while 0 not in dumps(tmp_path, "pending") and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        for process in processes:
            process.kill()
            process.wait()
    traces = {trace.rank: trace for trace in load_traces(tmp_path / "flight")}
    assert [call.group for call in traces[1].calls.groups] == [(1,)] and not traces[1].live
    assert [call.group_name for call in traces[1].calls.groups] == ["1"]  # torch's name: the order it was made in
    assert [call.group for call in traces[0].calls.groups] == [(0, 1)] and traces[0].live
    assert str(traces[0].calls.blocked_in) == "new_group(group=[0, 1]) at job.py:7 in <module>"


STORE_JOB = """import datetime, sys, time, torch, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), 1, True, timeout=datetime.timedelta(seconds=30))
dist.init_process_group("gloo", store=store, rank=0, world_size=1)  # torch's own store operations: not recorded
store.set("ready", "1")
store.wait(["written-by-nobody"], datetime.timedelta(seconds=1.5))
"""


@SLOW
def test_a_store_wait_for_a_key_nobody_set_is_kept_with_its_key_and_error_and_torchs_own_store_use_is_not(tmp_path):
    (tmp_path / "store_job.py").write_text(STORE_JOB)
    ended = subprocess.run([sys.executable, str(tmp_path / "store_job.py"), str(free_port())],
                           env=hook_env(tmp_path, 0), capture_output=True, text=True, timeout=120)
    assert ended.returncode == 1 and "DistStoreError" in ended.stderr
    [trace] = load_traces(tmp_path / "flight")
    assert [(op.op, op.keys, op.caller) for op in trace.calls.store] == [
        ("set", ("ready",), "store_job.py:4 in <module>"), ("wait", ("written-by-nobody",), "store_job.py:5 in <module>")]
    wait = trace.calls.store[-1]
    assert wait.waits and wait.error.startswith("DistStoreError: ") and wait.ended_at - wait.at >= 1.5
    # the snapshot taken while it waited, or, where the watcher looked again before the process ended (a busy
    # machine), the same wait rewritten as ended: never a wait ended without its error
    [pending] = read_calls(dumps(tmp_path, "pending")[0]["calls"]).store[-1:]
    assert (pending.op, pending.keys) == ("wait", ("written-by-nobody",))
    assert (pending.ended_at is None) == (pending.error is None)


TRANSPARENT_JOB = """receiving = dist.irecv(torch.zeros(2), 1 - rank)  # positional peer
sending = dist.isend(tensor=torch.full((2,), float(rank)), dst=1 - rank, tag=0)
receiving.wait()
sending.wait()
sent = torch.ones(3) * rank
got = torch.zeros(3)
ops = [dist.P2POp(dist.isend, sent, 1 - rank, tag=3), dist.P2POp(dist.irecv, got, 1 - rank, tag=3)]
for request in dist.batch_isend_irecv(ops):
    request.wait()
source = dist.recv(torch.zeros(1)) if rank == 0 else dist.send(torch.zeros(1), 0)
objects = [None, None]
dist.all_gather_object(objects, {"rank": rank})
try:
    dist.broadcast(torch.ones(1), src=5)
except RuntimeError as error:
    print("raised", type(error).__name__)
import torch.distributed.distributed_c10d as c10d
print(json.dumps({"got": got.tolist(), "source": source, "objects": objects, "name": dist.all_reduce.__name__,
                  "same": c10d.all_reduce is dist.all_reduce, "wrapped": dist.all_reduce.__wrapped__.__name__}))
dist.destroy_process_group()
"""


@SLOW
def test_the_wrapped_calls_return_and_raise_what_torchs_do_and_posted_operations_are_kept(tmp_path):
    ended = run_ranks(tmp_path, "import json\n" + TRANSPARENT_JOB, timeout=60)
    assert all('{"got"' in end.stdout for end in ended), ended[0].stdout  # the exit code: gloo may abort at exit
    unhooked = run_ranks(tmp_path, "import json\n" + TRANSPARENT_JOB, timeout=60, hooked=False)

    def said(end: subprocess.CompletedProcess) -> dict:  # gloo may abort the exit after it: 'terminate called ...'
        return json.loads(next(line for line in end.stdout.splitlines() if line.startswith('{"got"')))

    assert [said(end) for end in ended] == [said(end) for end in unhooked]
    assert said(ended[0]) == {"got": [1.0, 1.0, 1.0], "source": 1, "objects": [{"rank": 0}, {"rank": 1}], "name": "all_reduce",
                    "same": True, "wrapped": "all_reduce"}
    assert "raised RuntimeError" in ended[0].stdout
    traces = load_traces(tmp_path / "flight")
    calls = traces[0].calls
    assert [(call.op, call.src, call.dst, call.tag, call.is_async) for call in calls.posted] == [
        ("irecv", 1, None, None, True), ("isend", None, 1, None, True), ("batch_isend_irecv", None, None, None, True),
        ("isend", None, 1, 3, True), ("irecv", 1, None, 3, True)]
    assert calls.counts == {"init_process_group": 1, "irecv": 1, "isend": 1, "batch_isend_irecv": 1, "recv": 1,
                            "all_gather_object": 1, "broadcast": 1, "destroy_process_group": 1}  # no inner calls
    assert [(call.op, call.root) for call in calls.failed] == [("broadcast", 5)]
    assert calls.failed[0].error == "RuntimeError: ProcessGroupGloo::broadcast: invalid root rank: 5"
    assert [call.op for call in traces[1].calls.recent][-4:] == ["batch_isend_irecv", "send", "all_gather_object",
                                                                 "destroy_process_group"]


SEGFAULT = """import ctypes


def read_nothing():
    ctypes.string_at(0)


read_nothing()
"""


def test_a_segmentation_fault_writes_pythons_fatal_error_and_stack_to_stderr(tmp_path):
    (tmp_path / "crash.py").write_text(SEGFAULT)
    ended = subprocess.run([sys.executable, str(tmp_path / "crash.py")], capture_output=True, text=True, timeout=60,
                           env=hook_env(tmp_path, 0, RANK="0"))  # with the SIGTERM stack of torchrun's workers too
    assert ended.returncode == -11
    assert "Fatal Python error: Segmentation fault" in ended.stderr and "in read_nothing" in ended.stderr
    plain = subprocess.run([sys.executable, "-X", "faulthandler", "-c", "import faulthandler, sys; "
                            "print(faulthandler.is_enabled(), sys.stderr.fileno())"],
                           capture_output=True, text=True, timeout=60, env=hook_env(tmp_path, 0))
    assert plain.stdout == "True 2\n"  # the user's own faulthandler is left as it is


@SLOW
def test_a_collective_rejected_on_one_rank_is_told_by_what_the_ranks_passed_to_it(tmp_path):
    """Arguments that are not tensors are recorded briefly (split sizes, a list's length, None), and a crash inside a
    call names what the ranks passed differently: here all_gather_into_tensor's output, sized for 3 ranks on rank 1."""
    ended = run_ranks(tmp_path, """dist.all_to_all_single(torch.empty(4), torch.ones(4), output_split_sizes=[2, 2],
                       input_split_sizes=[2, 2])
dist.all_gather_into_tensor(torch.empty(4 if rank == 0 else 6), torch.ones(2))
""")
    traces = load_traces(tmp_path / "flight")
    returned = {trace.rank: trace.calls.recent[-1] for trace in traces}
    assert dict(returned[0].args) == {"output_split_sizes": "[2, 2]", "input_split_sizes": "[2, 2]"}
    nodes = [NodeEvidence(rank, f"node{rank}", 1, lines=node_log(rank, done)) for rank, done in enumerate(ended)]
    found = diagnose(Evidence(nodes=nodes, nnodes=2, master_addr="node0", master_port=29500,
                              command=["python", "job.py"], traces=traces))[0]
    assert (found.cause, found.rank) == ("rank-crashed", 1), found
    assert "tensors: rank 0 float32[4], float32[2]; rank 1 float32[6], float32[2]" in found.fix, found.fix
    assert "each rank's own data" in found.fix and "a file or a variable" not in found.fix


@SLOW
def test_object_lists_of_other_lengths_in_broadcast_object_list_are_named_as_such(tmp_path):
    """broadcast_object_list sends its list's sizes first: lists of other lengths abort gloo with a size message,
    which is about the lists, not tensors to pad (the generic advice there is to use broadcast_object_list)."""
    ended = run_ranks(tmp_path, """objects = [{"lr": 0.1}, {"steps": 3}] if rank == 0 else [None]
dist.broadcast_object_list(objects, src=0)
""", timeout=3)
    traces = load_traces(tmp_path / "flight")
    assert ("object_list", "list of 2") in next(trace for trace in traces if trace.rank == 0).calls.failed[-1].args
    nodes = [NodeEvidence(rank, f"node{rank}", done.returncode, lines=node_log(rank, done))
             for rank, done in enumerate(ended)]
    found = diagnose(Evidence(nodes=nodes, nnodes=2, master_addr="node0", master_port=29500,
                              command=["python", "job.py"], traces=traces))[0]
    assert "object lists of different lengths to broadcast_object_list (rank 0 list of 2" in found.title, found
    assert "the same length on every rank" in found.fix and "use all_gather_object" not in found.fix


def test_a_call_log_round_trips_through_json():
    log = {"pending": [{"op": "recv", "caller": "a.py:3 in f", "thread": "T", "src": 2, "tag": 4,
                        "tensors": [{"shape": [2, 3], "dtype": "float32"}], "entered_at": 1.5, "timeout_s": 5.0}],
           "failed": [{"op": "broadcast", "root": 1, "group": [0, 1], "async": True, "entered_at": 1.0,
                       "ended_at": 2.0, "error": "DistBackendError: timed out"}],
           "recent": [], "posted": [], "groups": [{"op": "new_group", "group": [0, 2]}],
           "store": [{"op": "wait", "keys": ["k"], "caller": "a.py:9 in g", "at": 3.0}], "counts": {"recv": 1}}
    calls = read_calls(json.loads(json.dumps(log)))
    assert calls.pending == (DistCall("recv", "a.py:3 in f", "T", src=2, tag=4, tensors=(Tensor((2, 3), "float32"),),
                                      entered_at=1.5, timeout_s=5.0),)
    assert str(calls.failed[0]) == "broadcast(root=1, group=[0, 1])" and calls.failed[0].is_async
    assert calls.groups[0].group == (0, 2) and calls.store == (StoreOp("wait", ("k",), "a.py:9 in g", 3.0),)
    assert calls.blocked_in.op == "recv" and calls.counts == {"recv": 1} and read_calls(None) is None


def _dump(reason: str, at: float, pending: list, failed: list, rank=0) -> dict:
    return {"node": "1", "pid": 9, "rank": rank, "world_size": 2, "reason": reason, "time": at, "started": 0.5,
            "trace": {"entries": []}, "calls": {"pending": pending, "failed": failed, "counts": {"recv": 1}}}


def test_the_dumps_of_one_process_merge_into_its_freshest_calls(tmp_path):
    recv = {"op": "recv", "src": 0, "entered_at": 2.0}
    (tmp_path / "pending-node1-pid9.json").write_text(json.dumps(_dump("pending", 3.0, [recv], [], rank=None)))
    [trace] = load_traces(tmp_path)  # killed in the recv: the snapshot is all there is, written while at work
    assert trace.live and not trace.ended_without_error and trace.calls.blocked_in.src == 0
    assert (trace.reached, trace.last, trace.waiting_in) == (0, None, None)
    (tmp_path / "exit-node1-pid9.json").write_text(json.dumps(_dump("exit", 5.0, [], [{**recv, "error": "E: x"}])))
    [trace] = load_traces(tmp_path)  # it went on to fail in it: its last words win
    assert not trace.live and trace.rank == 0 and trace.calls.pending == () and trace.calls.blocked_in.error == "E: x"
    (tmp_path / "live-node1-pid9.json").write_text(json.dumps(_dump("live", 4.0, [recv], [])))
    [trace] = load_traces(tmp_path)  # where the lab asked, the state is the live dump's; the calls the freshest
    assert trace.live and trace.calls.failed[0].error == "E: x"


@SLOW
def test_what_makes_ranks_compute_differently_is_kept_results_thrown_away_no_sync_hashes_and_seeds(tmp_path):
    """A result written into a tensor made for the call (not a named tensor, a view, a .grad, nor the root's own
    broadcast), DDP forwards inside and outside no_sync, the user's hash() of a string, torch's seed per rank, the
    variables read from the environment (not a copy of all of it), the files its code reads, and its own text."""
    (tmp_path / "settings.json").write_text("{}")  # read through pathlib (Path.read_text -> io.open)
    ended = run_ranks(tmp_path, """torch.manual_seed(100 + rank)
a, named, view = torch.ones(2), torch.ones(2), torch.ones(4)
dist.all_reduce(torch.stack([a[0], a[1]]))
dist.all_reduce(named)
dist.all_reduce(view[:2])
p = torch.nn.Parameter(torch.ones(3)); (p * 2).sum().backward(); dist.all_reduce(p.grad)
dist.all_reduce(tensor=a.clone())
dist.broadcast(torch.zeros(1), src=0)
shard = hash("file-3") % 2
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 1))
with model.no_sync():
    model(torch.ones(1, 2)).sum().backward()
    model(torch.ones(1, 2)).sum().backward()
model(torch.ones(1, 2)).sum().backward()
torch.optim.SGD(model.parameters(), lr=0.1 * (rank + 1)).step()
home, unset = os.environ.get("HOME"), os.getenv("LAB_TEST_UNSET")
copied = dict(os.environ)
text = open(__file__).read()
import pathlib; settings = pathlib.Path(__file__).with_name("settings.json").read_text()
pathlib.Path(__file__).with_name(f"written-{rank}.txt").write_text("x")
column = torch.ones(3, 2)[:, 0]; dist.broadcast(column, src=0)
for _ in range(20): dist.barrier()
mask = torch.sparse_coo_tensor(torch.tensor([[rank]]), torch.tensor([1.0]), (3,)); dist.all_reduce(mask)
dist.destroy_process_group()
""", timeout=30)
    assert [end.returncode for end in ended] == [0, 0], ended[0].stdout + ended[1].stdout
    traces = load_traces(tmp_path / "flight")
    calls = {trace.rank: trace.calls for trace in traces}
    assert all(trace.sources[str(tmp_path / "job.py")] == (tmp_path / "job.py").read_text() for trace in traces)
    for rank, log in calls.items():
        assert log.env_read["HOME"] == os.environ["HOME"] and log.env_read["LAB_TEST_UNSET"] is None
        assert "LAB_FLIGHT_DIR" not in log.env_read  # read by the hook itself, and copied by dict(os.environ)
        [read] = [op for op in log.reads if op.path == str(tmp_path / "job.py")]
        assert read.size == (tmp_path / "job.py").stat().st_size and read.digest and read.caller.startswith("job.py:")
        [through_pathlib] = [op for op in log.reads if op.path == str(tmp_path / "settings.json")]
        line = int(through_pathlib.caller.split(":")[1].split()[0])
        assert "read_text()" in (tmp_path / "job.py").read_text().splitlines()[line - 1]  # the user's line, not pathlib's
        assert through_pathlib.size == 2
        assert [(op.op, op.path) for op in log.writes] == [("write", str(tmp_path / f"written-{rank}.txt"))]
        assert log.flags["optimize"] == 0 and "utf8_mode" in log.flags and sys.executable in log.python
        assert log.versions["torch"].split()[0] == metadata.version("torch")
        assert "json" not in log.versions  # not the standard library's
        thrown = [(call.op, call.caller, call.discarded) for call in log.discarded]
        expected = [("all_reduce", "job.py:9 in <module>", "tensor"), ("all_reduce", "job.py:13 in <module>", "tensor")]
        assert thrown == expected + ([("broadcast", "job.py:14 in <module>", "tensor")] if rank == 1 else []), thrown
        assert log.hashed == ("job.py:15 in <module>",)
        assert log.ddp_forwards == {"synced": 1, "no_sync": 2} and log.torch_seed == 100 + rank
        assert log.started_in == log.cwd == os.getcwd()  # where relative paths pointed: no chdir here
        assert (log.optimizer_steps, log.learning_rates) == (1, (0.1 * (rank + 1),))
    assert calls[0].hash_probe != calls[1].hash_probe  # each process salts its own
    line = next(number for number, text in enumerate((tmp_path / "job.py").read_text().splitlines(), 1)
                if text.startswith("column ="))
    for log in calls.values():  # the strided broadcast, kept after 20 more calls pushed it out of the recent ones
        assert [(call.op, call.caller) for call in log.strided] == [("broadcast", f"job.py:{line} in <module>")]
        assert "broadcast" not in [call.op for call in log.recent]
        # a sparse tensor has no strides: it is kept as sparse, never as a strided view (nor in log.strided)
        [sparse] = [call for call in log.recent if call.op == "all_reduce" and call.tensors[0].layout]
        assert str(sparse.tensors[0]) == "float32[3] (sparse_coo)"


@SLOW
def test_a_fixed_hash_seed_leaves_hash_alone(tmp_path):
    """With PYTHONHASHSEED set every process hashes alike: hash() is not wrapped, the probes agree (the test above
    saw the salted case)."""
    (tmp_path / "job.py").write_text(INIT + "shard = hash('file-3')\ndist.barrier()\n")
    processes = [subprocess.Popen([sys.executable, str(tmp_path / "job.py"), str(port), str(rank), "30"],
                                  env=hook_env(tmp_path, rank, PYTHONHASHSEED="0"))
                 for port in [free_port()] for rank in (0, 1)]
    assert [process.wait(timeout=120) for process in processes] == [0, 0]
    traces = load_traces(tmp_path / "flight")
    assert len(traces) == 2 and not any(trace.calls.hashed for trace in traces)
    assert len({trace.calls.hash_probe for trace in traces}) == 1


@SLOW
def test_a_store_the_users_code_builds_is_a_call_and_a_counters_value_is_kept(tmp_path):
    ended = run_ranks(tmp_path, """store = dist.distributed_c10d._get_default_store()
store.add("round", 1)
if rank == 0:
    dist.TCPStore("127.0.0.1", int(sys.argv[1]) + 1, world_size=3, is_master=True,
                  timeout=datetime.timedelta(seconds=2))
""", timeout=30)
    assert [end.returncode for end in ended] == [1, 0], ended[0].stdout
    traces = {trace.rank: trace for trace in load_traces(tmp_path / "flight")}
    [built] = traces[0].calls.failed
    assert (built.op, built.argument("world_size"), built.argument("is_master")) == ("TCPStore", "3", "True")
    assert built.caller == "job.py:10 in <module>" and "waiting for clients" in built.error and built.timeout_s == 2
    assert sorted(op.value for trace in traces.values() for op in trace.calls.store if op.op == "add") == [1, 2]
    assert not traces[1].calls.failed  # torch's own store (init_process_group) is not the user's
    [init] = [call for call in traces[1].calls.recent if call.op == "init_process_group"]
    assert init.argument("init_method").startswith("tcp://127.0.0.1:")  # where the ranks meet, as given



COMPILED_COLLECTIVES = """
@torch.compile(fullgraph=True, backend="eager")
def summed(t):
    dist.all_reduce(t)
    return t * 2

@torch.compile(fullgraph=True, backend="eager")
def broadcast(t):
    dist.broadcast(t, src=0)
    return t

print("compiled:", summed(torch.ones(2) * (rank + 1)).tolist(), flush=True)
try:
    broadcast(torch.ones(2))
except Exception as error:
    where = [line for line in str(error).splitlines() if line.strip().startswith("File ")][-1]
    print("untraceable:", type(error).__name__, "in", where.split('"')[1].rsplit("/", 1)[-1])
dist.destroy_process_group()
"""


@SLOW
def test_collectives_inside_torch_compile_trace_or_fail_as_they_do_without_the_hook(tmp_path):
    """dynamo traces the wrapper the hook puts around each call: anything in it that dynamo cannot trace (threading's
    calls) would make the lab's hook the failure of a job that compiles its collectives, and the diagnosis blame it."""
    ended = run_ranks(tmp_path, COMPILED_COLLECTIVES, timeout=60)
    assert all("compiled: [6.0, 6.0]" in end.stdout for end in ended), ended[0].stdout[-3000:]
    unhooked = run_ranks(tmp_path, COMPILED_COLLECTIVES, timeout=60, hooked=False)

    def untraceable(end: subprocess.CompletedProcess) -> str:
        return next(line for line in end.stdout.splitlines() if line.startswith("untraceable:"))

    assert [untraceable(end) for end in ended] == [untraceable(end) for end in unhooked], ended[0].stdout[-3000:]


LAUNCHED_FROM_A_SCRIPT = """import sys
from torch.distributed.run import main
main(["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{sys.argv[1]}",
      "--rdzv-id", "sweep-1234", "--rdzv-conf", "join_timeout=2", "-m", "this.module.never.runs"])
"""


@SLOW
def test_a_torchrun_agent_started_from_a_script_keeps_its_rendezvous_settings_and_why_its_launch_failed(tmp_path):
    (tmp_path / "launch.py").write_text(LAUNCHED_FROM_A_SCRIPT)
    ended = subprocess.run([sys.executable, str(tmp_path / "launch.py"), str(free_port())], env=hook_env(tmp_path, 1),
                           capture_output=True, text=True, timeout=120)
    assert ended.returncode != 0 and "RendezvousTimeoutError" in ended.stderr, ended.stderr[-2000:]
    trace = load_traces(tmp_path / "flight")[0]
    launch = trace.calls.launch
    assert (launch["run_id"], launch["rdzv_backend"], launch["min_nodes"], launch["max_nodes"]) == (
        "sweep-1234", "c10d", "2", "2")
    assert trace.node == 1 and launch["error"].startswith("RendezvousTimeoutError")


MISSING_FILE = """import os, sys, torch.distributed as dist
try:
    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "shard.idx"), "rb")
except FileNotFoundError:
    pass
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
dist.destroy_process_group()
"""


@SLOW
def test_a_file_the_job_could_not_open_is_kept_with_when_it_was_asked_for(tmp_path):
    (tmp_path / "job.py").write_text(MISSING_FILE)
    subprocess.run([sys.executable, str(tmp_path / "job.py"), str(free_port())], env=hook_env(tmp_path, 0),
                   capture_output=True, text=True, timeout=120, check=True)
    reads = [op for op in load_traces(tmp_path / "flight")[0].calls.reads if op.error]
    assert [(op.path, op.caller, op.error.split(":")[0]) for op in reads] == [
        (str(tmp_path / "shard.idx"), "job.py:3 in <module>", "FileNotFoundError")] and reads[0].at is not None


@SLOW
def test_a_tuple_given_to_broadcast_object_list_is_told_on_the_rank_that_receives(tmp_path):
    """The hooks say a tuple is one (what the receivers cannot be written into), and the finding is the tuple, not
    lists that differ (None on the receivers is how the call is meant)."""
    ended = run_ranks(tmp_path, """objects = [{"lr": 0.1}, {"steps": 3}] if rank == 0 else (None, None)
dist.broadcast_object_list(objects, src=0)
""", timeout=3)
    traces = load_traces(tmp_path / "flight")
    assert ("object_list", "tuple of 2, all None") in next(
        trace for trace in traces if trace.rank == 1).calls.failed[-1].args
    nodes = [NodeEvidence(rank, f"node{rank}", done.returncode, lines=node_log(rank, done))
             for rank, done in enumerate(ended)]
    found = diagnose(Evidence(nodes=nodes, nnodes=2, master_addr="node0", master_port=29500,
                              command=["python", "job.py"], traces=traces))[0]
    assert (found.cause, found.rank) == ("collective-output-immutable", 1), found
    assert "gave it a tuple `objects`" in found.title and "a list on every rank" in found.fix


@SLOW
def test_a_file_a_node_mate_removed_is_told_by_who_removed_it(tmp_path):
    """Rank 0 writes its shard, rank 1 cleans the folder up keeping only its own, and rank 0 cannot read it back: the
    hooks keep the removal and the failed read, and the finding names who removed it (both ranks on one node)."""
    from dataclasses import replace
    ended = run_ranks(tmp_path, """path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shard-0.bin")
if rank == 0:
    with open(path, "wb") as handle:
        handle.write(b"weights")
dist.barrier()
if rank == 1:
    os.remove(path)
dist.barrier()
if rank == 0:
    open(path, "rb").read()
dist.barrier()
""", timeout=3)
    traces = [replace(trace, node=0) for trace in load_traces(tmp_path / "flight")]
    removed = next(trace for trace in traces if trace.rank == 1).calls.removed
    assert [(op.op, op.path) for op in removed] == [("remove", str(tmp_path / "shard-0.bin"))]
    lines = [line for rank, done in enumerate(ended) for line in node_log(rank, done)]
    found = diagnose(Evidence(nodes=[NodeEvidence(0, "node0", 1, lines=lines)], nnodes=1, nproc_per_node=2,
                              master_addr="node0", master_port=29500, command=["python", "job.py"], traces=traces))[0]
    assert (found.cause, found.rank) == ("file-removed-by-another-rank", 0), found
    assert "rank 1 had removed it (at job.py:" in found.title and "rank 0 wrote" in found.title
    assert "one process per folder" in found.fix


@SLOW
def test_a_folder_removed_with_shutil_is_kept_with_who_removed_it(tmp_path):
    """shutil.rmtree is wrapped when the job imports shutil (the hooks do not import it for every process)."""
    run_ranks(tmp_path, """import shutil
folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"out-{rank}")
os.makedirs(folder)
shutil.rmtree(folder)
dist.barrier()
""", timeout=3)
    removed = {trace.rank: trace.calls.removed for trace in load_traces(tmp_path / "flight")}
    assert [(op.op, op.path) for op in removed[1]] == [("rmtree", str(tmp_path / "out-1"))]
