"""The diagnosis engine against real log text.

Every log below was produced by the scripts in tests/failures/ (torch 2.13 CPU, gloo): on a 2-node
lab (node0/node1 containers, `--nproc-per-node 1`) or under `torchrun --nproc-per-node 2` on one
host; C++ frame dumps and repeated retry lines trimmed. GPU-only texts are quoted from NCCL and
torch as they print them (no GPU was available to capture them here).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from lab.analysis.diagnosis import (Evidence, Fault, NodeEvidence, diagnose, evidence_from_launch, findings_json,
                                      format_findings)
from lab.analysis.diagnosis.addresses import is_loopback
from lab.analysis.stacks import Frame, ProcessStack, ThreadStack



def stacked(node: int, pid: int, role: str, rank: int | None = None, env: dict | None = None,
            frames: list | None = None) -> ProcessStack:
    """A captured process (lab/analysis/stacks.py) whose main thread holds `frames`, innermost last."""
    return ProcessStack(node, pid, role, rank, None, dict(env or {}),
                        threads=[ThreadStack("MainThread", pid, True, list(frames or []))])


def lab_run(*logs: str, exit_codes=None, nproc=1, **facts) -> Evidence:
    """A run on len(logs) nodes; node i's combined output is logs[i]."""
    exit_codes = exit_codes or [1] * len(logs)
    nodes = [NodeEvidence(index, f"node{index}", exit_codes[index], lines=text.strip("\n").splitlines(),
                          interfaces=["lo", "eth0"]) for index, text in enumerate(logs)]
    return Evidence(nodes=nodes, nnodes=len(logs), nproc_per_node=nproc, master_addr="node0", **facts)


def causes(findings) -> list[str]:
    return [finding.cause for finding in findings]


# --- 2-node lab: MASTER_ADDR=localhost (tests/failures/master_addr_localhost.py, lab exec) -------------------------
LOCALHOST_NODE0 = """\
Traceback (most recent call last):
  File "/lab/shared/master_addr_localhost.py", line 15, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
  File "/opt/lab-venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 199, in _create_c10d_store
    return TCPStore(
torch.distributed.DistStoreError: Timed out after 9 seconds waiting for clients. 1/2 clients joined.
"""
LOCALHOST_NODE1 = """\
[W1123 10:59:14.098121327 socket.cpp:764] [c10d] The client socket has failed to connect to [localhost]:29887 (errno: 99 - Cannot assign requested address).
[W1123 10:59:14.368168158 socket.cpp:764] [c10d] The client socket has failed to connect to [localhost]:29887 (errno: 99 - Cannot assign requested address).
[E1123 10:59:22.997535725 socket.cpp:1028] [c10d] The client socket has timed out after 8000ms while trying to connect to (localhost, 29887).
[E1123 10:59:30.076497949 TCPStore.cpp:328] [c10d] TCP client failed to connect/validate to host localhost:29887 - timed out (try=1, timeout=8000ms): The client socket has timed out after 8000ms while trying to connect to (localhost, 29887).
Traceback (most recent call last):
  File "/lab/shared/master_addr_localhost.py", line 15, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
  File "/opt/lab-venv/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 199, in _create_c10d_store
    return TCPStore(
torch.distributed.DistNetworkError: The client socket has timed out after 8000ms while trying to connect to (localhost, 29887).
"""


def test_localhost_on_two_nodes_is_the_root_cause():
    findings = diagnose(lab_run(LOCALHOST_NODE0, LOCALHOST_NODE1, master_port=29887))
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("master-addr-loopback", 1, 1)
    assert "[localhost]:29887" in top.evidence and "node0" in top.fix
    assert "script's own os.environ['MASTER_ADDR']" in top.fix  # the lab launched it with node0: the script set it
    assert "ranks-missing" in causes(findings)  # node0's "1/2 clients joined" is the consequence, listed after


def test_loopback_from_the_command_line_when_no_log_names_it():
    run = lab_run(LOCALHOST_NODE0, "Killed\n", command=["torchrun", "--nnodes=2", "--master_addr", "127.0.0.2", "x.py"])
    top = diagnose(run)[0]
    assert top.cause == "master-addr-loopback" and "--master_addr 127.0.0.2" in top.evidence


def test_loopback_from_a_process_environment():
    stack = stacked(node=1, pid=77, role="worker", rank=1, env={"MASTER_ADDR": "::1"})
    top = diagnose(lab_run(LOCALHOST_NODE0, "", processes=[stack]))[0]
    assert (top.cause, top.node, top.rank) == ("master-addr-loopback", 1, 1)


# --- one host, torchrun x2: a rank crashes; the harmless ::1 errno 99 line is in the log -----------------------------
RANK_CRASH_ONE_NODE = """\
[W1123 10:57:00.000000000 socket.cpp:764] [c10d] The client socket has failed to connect to [localhost]:30190 (errno: 99 - Cannot assign requested address).
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/main/tests/failures/rank_crash.py", line 19, in <module>
[rank1]:     batch = load_batch(rank)
[rank1]:   File "/work/main/tests/failures/rank_crash.py", line 11, in load_batch
[rank1]:     raise ValueError("corrupt sample in shard 1")  # the bug: only rank 1's data hits it
[rank1]: ValueError: corrupt sample in shard 1
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/main/tests/failures/rank_crash.py", line 20, in <module>
[rank0]:     dist.all_reduce(batch)
[rank0]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank0]:     work.wait()
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:64202. This is typically caused by a remote worker crashing. Check the logs of the remote worker before reporting an error. GLHF! 🏖️
E1123 10:57:00.912000 2983 .venv/lib/python3.11/site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 3007) of binary: /work/main/.venv/bin/python
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_10:57:00
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 3007)
"""


def test_crashed_rank_comes_before_the_peers_connection_errors():
    findings = diagnose(lab_run(RANK_CRASH_ONE_NODE, nproc=2))
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("rank-crashed", 0, 1)
    assert "ValueError: corrupt sample in shard 1" in top.evidence
    assert "rank_crash.py:11" in top.evidence and "rank_crash.py:11" in top.fix
    assert causes(findings).index("peer-lost") > 0


def test_single_node_localhost_errno_99_is_not_a_loopback_problem():
    assert "master-addr-loopback" not in causes(diagnose(lab_run(RANK_CRASH_ONE_NODE, nproc=2)))


def test_a_passing_run_has_no_findings():
    passing = "[W1123 11:00:00.0 socket.cpp:764] [c10d] The client socket has failed to connect to [localhost]:29500 " \
              "(errno: 99 - Cannot assign requested address).\nrank 0: 2.0\nrank 1: 2.0\n"
    assert diagnose(lab_run(passing, passing, exit_codes=[0, 0])) == []


def test_rank_crash_across_nodes_names_the_node_it_happened_on():
    node0 = "\n".join(line for line in RANK_CRASH_ONE_NODE.splitlines() if line.startswith("[rank0]"))
    node1 = "\n".join(line for line in RANK_CRASH_ONE_NODE.splitlines() if line.startswith("[rank1]"))
    top = diagnose(lab_run(node0, node1))[0]
    assert (top.cause, top.node, top.rank) == ("rank-crashed", 1, 1)


# --- MASTER_ADDR that does not resolve (tests/failures/master_addr_unresolvable.py) ---------------------------------
UNRESOLVABLE = """\
[W1123 10:55:59.887865590 socket.cpp:764] [c10d] The IPv6 network addresses of (nodee0, 30162) cannot be retrieved (gai error: -2 - Name or service not known).
[E1123 10:56:03.687311705 socket.cpp:1028] [c10d] The client socket has timed out after 5000ms while trying to connect to (nodee0, 30162).
Traceback (most recent call last):
  File "/work/main/tests/failures/master_addr_unresolvable.py", line 11, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
torch.distributed.DistNetworkError: The client socket has timed out after 5000ms while trying to connect to (nodee0, 30162).
"""


def test_unresolvable_master_addr():
    findings = diagnose(lab_run(UNRESOLVABLE, UNRESOLVABLE))
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("master-addr-unresolvable", 0, 0)
    assert "nodee0" in top.title and "gai error: -2" in top.evidence
    assert "rank-crashed" not in causes(findings)  # the DistNetworkError is a symptom, not a crash


# --- nothing listening on the port node1 dials (tests/failures/master_port_closed.py on the 2-node lab) -------------
PORT_CLOSED_NODE0 = LOCALHOST_NODE0.replace("master_addr_localhost", "master_port_closed")
PORT_CLOSED_NODE1 = """\
[E1123 10:59:50.968404564 socket.cpp:1028] [c10d] The client socket has timed out after 8000ms while trying to connect to (node0, 29769).
[W1123 10:59:50.968814275 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host node0:29769 - retrying (try=0, timeout=8000ms, delay=4428ms): The client socket has timed out after 8000ms while trying to connect to (node0, 29769).
Traceback (most recent call last):
  File "/lab/shared/master_port_closed.py", line 16, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
torch.distributed.DistNetworkError: The client socket has timed out after 8000ms while trying to connect to (node0, 29769).
"""


def test_nothing_listening_on_the_dialled_port():
    top = diagnose(lab_run(PORT_CLOSED_NODE0, PORT_CLOSED_NODE1, master_port=29768))[0]
    assert (top.cause, top.node, top.rank) == ("master-unreachable", 1, 1)
    assert "node0:29769" in top.title and "29768" in top.fix


def test_connection_refused_variant():
    refused = "[W socket.cpp:697] [c10d] The client socket has failed to connect to [node0]:29500 " \
              "(errno: 111 - Connection refused).\n"
    top = diagnose(lab_run("", refused, exit_codes=[None, None], timed_out=True, master_port=29500))[0]
    assert (top.cause, top.node) == ("master-unreachable", 1)


# --- port already in use ---------------------------------------------------------------------------------------------
PORT_IN_USE = """\
Traceback (most recent call last):
  File "/work/main/tests/failures/master_port_in_use.py", line 17, in <module>
    dist.init_process_group("gloo", rank=rank, world_size=world_size,
torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 30190, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use
"""


def test_port_already_in_use():
    top = diagnose(lab_run(PORT_IN_USE, PORT_CLOSED_NODE1))[0]
    assert (top.cause, top.node, top.rank) == ("master-port-in-use", 0, 0)
    assert "port 30190" in top.title


def test_port_in_use_from_a_python_bind():
    line = "OSError: [Errno 98] Address already in use (while attempting to bind on address ('', 30183))"
    top = diagnose(lab_run(f"Traceback (most recent call last):\n{line}\n"))[0]
    assert top.cause == "master-port-in-use" and "port 30183" in top.title


def test_an_eof_outside_torch_load_is_no_checkpoint_read_while_written():
    log = ('Traceback (most recent call last):\n  File "/w/train.py", line 9, in <module>\n    line = input()\n'
           "EOFError: EOF when reading a line\n")
    assert "checkpoint-read-while-written" not in causes(diagnose(lab_run(log, log)))


def test_a_truncated_checkpoint_under_torch_load_is_a_file_still_being_written():
    log = ('Traceback (most recent call last):\n  File "/w/train.py", line 23, in <module>\n    state = torch.load(p)\n'
           '  File "/venv/lib/python3.11/site-packages/torch/serialization.py", line 1520, in load\n'
           "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory\n")
    top = diagnose(lab_run("", log, exit_codes=[1, 1]))[0]
    assert top.cause == "checkpoint-read-while-written" and "dist.barrier()" in top.fix


def test_a_rename_only_one_rank_found_gone_may_also_be_a_file_nobody_wrote():
    log = ('Traceback (most recent call last):\n  File "/w/train.py", line 17, in save\n    os.replace(tmp, path)\n'
           "FileNotFoundError: [Errno 2] No such file or directory: 'ckpt/last.pt.tmp' -> 'ckpt/last.pt'\n")
    top = diagnose(lab_run("", log, exit_codes=[0, 1]))[0]
    assert top.cause == "rename-race" and "rank 1 found ckpt/last.pt.tmp gone" in top.title
    assert "another rank renamed it first" in top.title and "or no rank wrote it" in top.title


# --- world size ------------------------------------------------------------------------------------------------------
def test_world_size_larger_than_launched():
    node0 = "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for clients. 2/3 clients joined.\n"
    top = diagnose(lab_run(node0, "torch.distributed.DistNetworkError: The client socket has timed out\n"))[0]
    assert (top.cause, top.node, top.rank) == ("world-size-mismatch", 0, 0)
    assert "3" in top.title and "world_size=2" in top.fix


def test_world_size_larger_under_torchrun_from_the_missing_key():
    log = "[rank0]: torch.distributed.DistStoreError: wait timeout after 5000ms, keys: /default_pg/0//cpu//0/2\n"
    top = diagnose(lab_run(log, nproc=2))[0]
    assert (top.cause, top.rank) == ("world-size-mismatch", 0)


def test_all_expected_ranks_but_some_missing_is_not_a_world_size_mismatch():
    findings = diagnose(lab_run(LOCALHOST_NODE0, "", exit_codes=[1, None]))
    assert "world-size-mismatch" not in causes(findings) and causes(findings)[0] == "ranks-missing"


# --- interfaces ------------------------------------------------------------------------------------------------------
IFNAME = "RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:84] " \
         "ifa != nullptr. Unable to find address for: ib0\n"


def test_missing_socket_interface():
    run = lab_run(IFNAME, IFNAME, env={"GLOO_SOCKET_IFNAME": "ib0"})
    top = diagnose(run)[0]
    assert (top.cause, top.node, top.rank) == ("socket-ifname-missing", 0, 0)
    assert "GLOO_SOCKET_IFNAME" in top.title and "'ib0'" in top.title and "eth0" in top.fix


def test_missing_nccl_interface_quoted():
    nccl = "node1:223645:223645 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found\n"
    top = diagnose(lab_run("", nccl))[0]
    assert (top.cause, top.node) == ("socket-ifname-missing", 1) and "NCCL_SOCKET_IFNAME" in top.title


# --- collectives -----------------------------------------------------------------------------------------------------
COLLECTIVE_MISMATCH = """\
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/main/tests/failures/collective_mismatch.py", line 19, in <module>
[rank0]:     dist.all_reduce(value)
[rank0]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank0]:     work.wait()
[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/main/tests/failures/collective_mismatch.py", line 17, in <module>
[rank1]:     dist.barrier()
[rank1]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 5356, in barrier
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 5000ms for recv operation to complete
"""


def test_ranks_in_different_collectives_from_their_tracebacks():
    top = diagnose(lab_run(COLLECTIVE_MISMATCH, nproc=2))[0]
    assert top.cause == "collective-mismatch" and top.node == 0 and top.rank in (0, 1)
    assert "all_reduce" in top.evidence and "barrier" in top.evidence


def test_collective_order_from_stack_dumps():
    def worker(rank, function, line):
        return stacked(node=rank, pid=100 + rank, role="worker", rank=rank, frames=[
            Frame("<module>", "/lab/shared/train.py", line),
            Frame(function, "/opt/lab-venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 3252)])
    stacks = [worker(0, "all_reduce", 30), worker(1, "all_reduce", 30), worker(2, "broadcast", 41),
              stacked(node=0, pid=9, role="agent", frames=[Frame("_poll", "/x/torch/distributed/run.py", 1)])]
    run = lab_run("", "", "", exit_codes=[None] * 3, timed_out=True, processes=stacks)
    findings = diagnose(run)
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("collective-mismatch", 2, 2)
    assert "rank 2 in broadcast (train.py:41)" in top.evidence
    assert causes(findings)[-1] == "timed-out"


def test_same_collective_same_place_is_not_a_mismatch():
    def worker(rank):
        return stacked(node=rank, pid=rank, role="worker", rank=rank, frames=[
            Frame("<module>", "/lab/shared/train.py", 30),
            Frame("all_reduce", "/site-packages/torch/distributed/distributed_c10d.py", 3252)])
    run = lab_run("", "", exit_codes=[None, None], timed_out=True, processes=[worker(0), worker(1)])
    assert causes(diagnose(run)) == ["timed-out"]


SHAPE_GLOO = """\
terminate called after throwing an instance of 'gloo::EnforceNotMet'
  what():  [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:456] op.preamble.length <= op.nbytes. 12 vs 8. Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/main/tests/failures/shape_mismatch.py", line 13, in <module>
[rank1]:     dist.all_reduce(gradients)
[rank1]:   File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 3252, in all_reduce
[rank1]:     work.wait()
[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:30426: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application. Check the logs of the remote worker before reporting an error. GLHF! 🏖️
Root Cause (first observed failure):
[0]:
  rank      : 0 (local_rank: 0)
  exitcode  : -6 (pid: 4531)  (SIGABRT)
"""
DETAIL_SHAPE = "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: " \
    "CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[9], TensorDtypes=Float), but Rank 0 is " \
    "running collective: CollectiveFingerPrint(SequenceNumber=0, OpType=ALLREDUCE, TensorShape=[8], " \
    "TensorDtypes=Float).Collectives differ in the following aspects:   Tensor Tensor shapes: 9vs 8"
DETAIL_OP = "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: " \
    "CollectiveFingerPrint(SequenceNumber=0OpType=BARRIER), but Rank 0 is running collective: " \
    "CollectiveFingerPrint(SequenceNumber=0OpType=GATHER).Collectives differ in the following aspects:   " \
    "Op type: BARRIERvs GATHER"


def test_shape_mismatch_from_gloo():
    findings = diagnose(lab_run(SHAPE_GLOO, nproc=2))
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("shape-mismatch", 0, 0)  # rank from torchrun's root-cause report
    assert "op.preamble.length <= op.nbytes" in top.evidence
    assert "rank-crashed" not in causes(findings)


def test_detail_mode_tells_shape_from_order():
    assert causes(diagnose(lab_run(DETAIL_SHAPE, nproc=2)))[0] == "shape-mismatch"
    top = diagnose(lab_run(DETAIL_OP, nproc=2))[0]
    assert (top.cause, top.rank) == ("collective-mismatch", 1) and "BARRIER vs GATHER" in top.title


# --- memory ----------------------------------------------------------------------------------------------------------
KILLED_WORKER = """\
pid 5487 rank 1
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_11:01:13
  host      : node1
  rank      : 1 (local_rank: 0)
  exitcode  : -9 (pid: 5487)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 5487
"""


def test_out_of_memory_names_node_rank_and_limit():
    run = lab_run("", KILLED_WORKER)
    run.nodes[1].oom_killed, run.nodes[1].memory_limit = True, "1g"
    top = diagnose(run)[0]
    assert (top.cause, top.node, top.rank) == ("out-of-memory", 1, 1)
    assert "limit 1g" in top.title and "exitcode  : -9" in top.evidence and "--memory" in top.fix


def test_sigkill_without_oom_count_is_not_called_out_of_memory():
    findings = diagnose(lab_run("", KILLED_WORKER))
    assert "out-of-memory" not in causes(findings) and causes(findings)[0] == "process-killed"


# --- GPUs (NCCL/CUDA text quoted from torch and NCCL) ------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "RuntimeError: Distributed package doesn't have NCCL built in",  # measured: torch CPU build
    "[rank1]: ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
    "RuntimeError: No CUDA GPUs are available",
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver",
])
def test_nccl_or_cuda_on_a_node_without_gpus(line):
    top = diagnose(lab_run("", line + "\n"))[0]
    assert (top.cause, top.node, top.rank) == ("nccl-without-gpu", 1, 1) and "gloo" in top.fix


def test_more_nccl_processes_than_gpus():
    log = ("node0:1585:1585 [0] init.cc:738 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\n"
           "[rank1]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage\n")
    run = lab_run(log, nproc=2)
    run.nodes[0].gpus = 1
    top = diagnose(run)[0]
    assert (top.cause, top.node) == ("duplicate-gpu", 0) and "--nproc-per-node 1" in top.fix


# --- faults ----------------------------------------------------------------------------------------------------------
def test_lab_fault_explains_the_peers_errors():
    node0 = "\n".join(line for line in RANK_CRASH_ONE_NODE.splitlines() if line.startswith("[rank0]"))
    findings = diagnose(lab_run(node0, "", exit_codes=[1, None], faults=[Fault(1, "kill-node")]))
    top = findings[0]
    assert (top.cause, top.node) == ("lab-fault", 1) and "killed" in top.title
    assert "peer-lost" in causes(findings)


def test_a_fault_in_force_after_the_run_is_named_in_words_with_the_rank_of_a_one_process_node():
    """After a run the lab reports faults as node states ('partitioned', 'paused'), not as manifest actions."""
    node0 = "\n".join(line for line in RANK_CRASH_ONE_NODE.splitlines() if line.startswith("[rank0]"))
    top = diagnose(lab_run(node0, "", exit_codes=[1, None], faults=[Fault(1, "partitioned")]))[0]
    assert (top.cause, top.node, top.rank) == ("lab-fault", 1, 1) and "cut off from the network" in top.title
    top = diagnose(lab_run(node0, "", nproc=2, exit_codes=[1, None], faults=[Fault(1, "paused")]))[0]
    assert (top.cause, top.node, top.rank) == ("lab-fault", 1, None) and "was paused" in top.title


def test_a_fault_that_did_not_touch_the_failure_comes_after_the_cause():
    findings = diagnose(lab_run(IFNAME, "", exit_codes=[1, 0], faults=[Fault(1, "delay")]))
    assert causes(findings) == ["socket-ifname-missing", "lab-fault"]


# --- exceptions at start ---------------------------------------------------------------------------------------------
IMPORT_ERROR = """\
Traceback (most recent call last):
  File "/work/main/tests/failures/import_error.py", line 5, in <module>
    import wandb  # noqa: F401  the mistake: installed on the laptop, not on the nodes
    ^^^^^^^^^^^^
ModuleNotFoundError: No module named 'wandb'
"""


def test_import_error_at_start():
    top = diagnose(lab_run(IMPORT_ERROR, IMPORT_ERROR))[0]
    assert (top.cause, top.node, top.rank) == ("import-error", 0, 0)
    assert "import_error.py:5" in top.evidence and "install 'wandb'" in top.fix


# A lab whose node1 lacks a package node0 has (`lab torchrun`, tests/integration/test_packages.py): node0 waits.
MISSING_ON_NODE1 = """\
[rank1]:Traceback (most recent call last):
[rank1]:  File "/lab/shared/runs/r1/work/project/uses_six.py", line 1, in <module>
[rank1]:    import datetime, six, torch.distributed as dist
[rank1]:ModuleNotFoundError: No module named 'six'
"""


def test_a_module_missing_on_some_nodes_only_is_a_difference_between_the_nodes():
    top = diagnose(lab_run("", MISSING_ON_NODE1, exit_codes=[None, 1], stopped="node1 failed"))[0]
    assert (top.cause, top.node, top.rank) == ("package-missing-on-nodes", 1, 1)
    assert "'six' is missing on node1 only" in top.title and "lab up --pip" in top.fix and "lab doctor" in top.fix


def test_a_module_missing_on_every_node_is_not_called_a_difference():
    both = diagnose(lab_run(MISSING_ON_NODE1, MISSING_ON_NODE1))
    assert causes(both)[0] == "import-error" and "package-missing-on-nodes" not in causes(both)
    alone = diagnose(lab_run(MISSING_ON_NODE1))  # a one-node run has no other node to differ from
    assert causes(alone)[0] == "import-error"


# node1 runs another version of transformers (a name the script imports is not in it) and another numpy.
OTHER_VERSION_ON_NODE1 = """\
[rank1]:Traceback (most recent call last):
[rank1]:  File "/lab/shared/runs/r1/work/train.py", line 3, in <module>
[rank1]:    from transformers import Qwen3Config
[rank1]:ImportError: cannot import name 'Qwen3Config' from 'transformers' (/opt/lab-venv/lib/python3.11/site-packages/transformers/__init__.py)
"""
ATTRIBUTE_AT_TOP = """\
Traceback (most recent call last):
  File "/lab/shared/runs/r1/work/train.py", line 4, in <module>
    DTYPE = numpy.float128x
AttributeError: module 'numpy' has no attribute 'float128x'
"""
ATTRIBUTE_IN_A_FUNCTION = """\
Traceback (most recent call last):
  File "/lab/shared/runs/r1/work/train.py", line 20, in <module>
    main()
  File "/lab/shared/runs/r1/work/train.py", line 12, in main
    if rank == 1: numpy.float128x
AttributeError: module 'numpy' has no attribute 'float128x'
"""


def test_a_name_missing_from_a_package_on_some_nodes_only_is_a_version_difference():
    top = diagnose(lab_run("step 1 done", OTHER_VERSION_ON_NODE1, exit_codes=[None, 1], stopped="node1 failed"))[0]
    assert (top.cause, top.node, top.rank) == ("package-version-differs", 1, 1)
    assert top.title == "'transformers' differs between the nodes: on node1 it has no 'Qwen3Config', which the other " \
                        "nodes got past"
    assert "lab doctor --package transformers" in top.fix
    top = diagnose(lab_run("step 1 done", ATTRIBUTE_AT_TOP, exit_codes=[None, 1], stopped="node1 failed"))[0]
    assert top.cause == "package-version-differs" and "'numpy'" in top.title and "'float128x'" in top.title


def test_a_name_missing_everywhere_or_on_one_rank_path_is_no_version_difference():
    everywhere = diagnose(lab_run(OTHER_VERSION_ON_NODE1, OTHER_VERSION_ON_NODE1))
    assert causes(everywhere)[0] == "import-error" and "package-version-differs" not in causes(everywhere)
    one_path = diagnose(lab_run("step 1 done", ATTRIBUTE_IN_A_FUNCTION, exit_codes=[None, 1], stopped="node1 failed"))
    assert causes(one_path)[0] == "rank-crashed"  # a branch only rank 1 takes: the same numpy everywhere may lack it
    alone = diagnose(lab_run(OTHER_VERSION_ON_NODE1))
    assert causes(alone)[0] == "import-error"


def test_import_error_rank_from_torchrun_report_when_lines_have_no_prefix():
    log = IMPORT_ERROR + "Root Cause (first observed failure):\n[0]:\n  rank      : 1 (local_rank: 1)\n" \
                         "  exitcode  : 1 (pid: 26955)\n"
    top = diagnose(lab_run(log, nproc=2))[0]
    assert (top.cause, top.rank) == ("import-error", 1)


@pytest.mark.parametrize("message", [
    "AssertionError: Process group cannot be None",  # destroy_process_group without init, torch 2.13
    "ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
])
def test_process_group_never_initialised(message):
    log = ("Traceback (most recent call last):\n"
           '  File "/work/main/tests/failures/destroy_without_init.py", line 9, in <module>\n'
           "    dist.destroy_process_group()  # ... but not the clean-up\n"
           '  File "/x/site-packages/torch/distributed/distributed_c10d.py", line 2382, in destroy_process_group\n'
           '    raise AssertionError("Process group cannot be None")\n' + message + "\n")
    findings = diagnose(lab_run(log, log))
    top = findings[0]
    assert (top.cause, top.node, top.rank) == ("process-group-not-initialized", 0, 0)
    assert message in top.evidence and "raise" not in top.evidence
    assert "rank-crashed" not in causes(findings)


def test_argparse_usage_error():
    log = "usage: train.py [-h] --rank RANK\ntrain.py: error: the following arguments are required: --rank\n"
    top = diagnose(lab_run(log, log, exit_codes=[2, 2]))[0]
    assert (top.cause, top.node, top.rank) == ("bad-arguments", 0, 0) and "--rank" in top.title


# --- endings, rendering, building evidence ---------------------------------------------------------------------------
def test_unexplained_exit_falls_back_to_the_last_line():
    findings = diagnose(lab_run("step 3\nno shard for this rank, giving up\n", "", exit_codes=[3, 0]))
    assert [(f.cause, f.node) for f in findings] == [("rank-exited", 0)]
    assert "exit status 3" in findings[0].title and "no shard for this rank" in findings[0].title
    assert "sys.exit" in findings[0].fix


def test_a_shell_status_of_a_fatal_signal_is_that_signal_not_a_bare_exit_code():
    findings = diagnose(lab_run("step 3\n", "", exit_codes=[139, 0]))
    assert (findings[0].cause, findings[0].node) == ("fatal-signal", 0) and "SIGSEGV" in findings[0].title


def test_format_and_json():
    findings = diagnose(lab_run(LOCALHOST_NODE0, LOCALHOST_NODE1))
    short = format_findings(findings)
    assert short.startswith("cause: the script sets MASTER_ADDR to localhost itself, over the node0 the launcher gave "
                            "every rank, so each node dials itself (node1, rank 1)")
    assert "more finding" in short and "1/2 clients joined" not in short
    assert "1/2 clients joined" in format_findings(findings, verbose=True)
    data = json.loads(findings_json(findings))
    assert data[0]["cause"] == "master-addr-loopback" and set(data[0]) == {"cause", "title", "evidence", "node",
                                                                          "rank", "fix"}
    assert format_findings([]) == "no cause found in the logs"


def test_evidence_from_a_launch_result():
    result = SimpleNamespace(exit_codes={0: 1, 1: None}, logs={0: LOCALHOST_NODE0, 1: LOCALHOST_NODE1},
                             timed_out=True, oom_killed=[1], node_exits={0: 1795618916.2}, started_at=1795618900.5)
    evidence = evidence_from_launch(result, nnodes=2, interfaces={0: ["lo", "eth0"]}, faults=[(1, "pause")],
                                    master_addr="node0", master_port=29887)
    assert [node.exit_code for node in evidence.nodes] == [1, None]
    assert [node.exited_at for node in evidence.nodes] == [1795618916.2, None] and evidence.started_at == 1795618900.5
    assert evidence.nodes[1].oom_killed and not evidence.nodes[0].oom_killed
    assert evidence.nodes[0].lines[-1].startswith("torch.distributed.DistStoreError")
    assert evidence.faults == [Fault(1, "pause")] and evidence.timed_out and evidence.failed


@pytest.mark.parametrize("host, loopback", [("localhost", True), ("127.0.1.1", True), ("::1", True),
                                            ("[::1]", True), ("::ffff:127.0.0.1", True), ("node0", False),
                                            ("172.26.0.2", False), ("localhost-not", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_a_retry_that_may_have_succeeded_is_not_an_unreachable_master():
    retry = PORT_CLOSED_NODE1.splitlines()[1]  # "... - retrying (try=0 ...)": the store was still starting
    findings = diagnose(lab_run("", retry + "\nstep 7 loss nan\n", exit_codes=[0, 3]))
    assert causes(findings) == ["rank-exited"]


def test_a_failed_retry_is_the_cause_when_rank_0_waited_for_that_rank():
    log = ("[W1123 10:56:20.666792932 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host "
           "127.0.0.1:30170 - retrying (try=0, timeout=5000ms, delay=5246ms): The client socket has timed out after "
           "5000ms while trying to connect to (127.0.0.1, 30170).\n"
           "torch.distributed.DistStoreError: wait timeout after 5000ms, keys: /default_pg/0//cpu//0/1\n")
    findings = diagnose(lab_run(log, nproc=2, master_port=30169))
    assert causes(findings) == ["master-unreachable", "ranks-missing"] and "30169" in findings[0].fix


MODULE_SPEC = ("/opt/lab-venv/bin/python: Error while finding module specification for 'mypkg.train' "
               "(ModuleNotFoundError: No module named 'mypkg')")


def test_python_dash_m_of_a_project_missing_on_one_node_is_a_difference_between_nodes():
    """`python -m` prints one line, no traceback: node1 has no copy of the project, node0 ran it."""
    found = diagnose(lab_run("training...", MODULE_SPEC, exit_codes={0: None, 1: 1}, timed_out=True))[0]
    assert (found.cause, found.node) == ("package-missing-on-nodes", 1)
    assert "'mypkg' cannot be found on node1 only" in found.title and "--workspace" in found.fix


@pytest.mark.parametrize("line", [MODULE_SPEC, "/usr/bin/python3: No module named mypkg"])
def test_python_dash_m_that_finds_nothing_anywhere_says_where_the_project_should_be(line):
    found = diagnose(lab_run(line, line, exit_codes={0: 1, 1: 1}))[0]
    assert found.cause == "import-error" and "python -m cannot find 'mypkg' on node0, node1" in found.title
    assert "lab_workspace" in found.fix


def test_a_module_named_in_a_message_of_the_job_is_not_python_dash_m():
    found = diagnose(lab_run("warning: No module named yaml, using json", "", exit_codes={0: 1, 1: 0}))
    assert [finding.cause for finding in found] == ["rank-exited"]


def test_the_advice_an_error_message_gives_is_kept_and_a_message_without_one_gets_none():
    from lab.analysis.diagnosis.crashes import message_advice
    assert message_advice("Default process group has not been initialized, please make sure to call "
                          "init_process_group.") == "please make sure to call init_process_group."
    assert message_advice("Expected to have finished reduction. This error indicates unused parameters. You can "
                          "enable detection by passing `find_unused_parameters=True`.").startswith("You can enable")
    assert message_advice("CUDA error: invalid device ordinal. For debugging consider passing "
                          "CUDA_LAUNCH_BLOCKING=1.") == ""  # a tip for debugging is not a fix
    assert message_advice("mat1 and mat2 shapes cannot be multiplied (32x10 and 12x48)") == ""
