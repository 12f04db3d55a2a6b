"""The failures that only appear across nodes, on the real logs of tests/failures/ scripts run on a 2-node lab
(tests/unit/diagnosis_samples/<script>/): each family named with its evidence and fix, and cases where each rule
must not fire."""

import json
from pathlib import Path

import pytest

from lab.analysis.diagnosis import Evidence, NodeEvidence, diagnose
from lab.analysis.stacks import load_stacks

SAMPLES = Path(__file__).parent / "diagnosis_samples"


def sample(name: str, **changes) -> Evidence:
    folder = SAMPLES / name
    run = json.loads((folder / "run.json").read_text())
    codes = {int(node): code for node, code in run["exit_codes"].items()}
    codes.update(changes.pop("exit_codes", {}))
    nodes = [NodeEvidence(index, f"node{index}", codes[index], lines=(folder / f"node{index}.log").read_text().splitlines(),
                          interfaces=["lo", "eth0"]) for index in (0, 1)]
    processes = load_stacks(folder) if (folder / "stacks.json").is_file() else []  # taken before the lab stopped it
    return Evidence(nodes=nodes, nnodes=2, master_addr="node0", master_port=29500, command=run["command"],
                    processes=processes, **changes)


def top(name: str, **changes):
    return diagnose(sample(name, **changes))[0]


def test_a_rank_that_finished_early_is_named_not_a_dead_peer():
    found = top("uneven_batches")
    assert (found.cause, found.node, found.rank) == ("uneven-collectives", 0, 0)
    assert found.title.startswith("node1 finished (exit 0) while node0 still waited for it in a collective at ")
    assert "uneven_batches.py:19" in found.title and "Join" in found.fix and "DistributedSampler" in found.fix
    assert "died" not in found.fix


def test_uneven_collectives_need_a_node_that_finished():
    """The same log, but node1 failed too (a crash or a kill): no one left normally, so it is not divergence."""
    causes = [finding.cause for finding in diagnose(sample("uneven_batches", exit_codes={1: 1}))]
    assert "uneven-collectives" not in causes and causes[0] == "peer-lost"


def test_a_service_answering_on_the_rendezvous_port_is_named():
    found = top("rendezvous_on_a_service_port")
    assert (found.cause, found.node) == ("wrong-service-on-port", 1)
    assert "something other than a torch store answers at node0:22" in found.title and "sshd's" in found.title
    assert "not 22" in found.fix and "nothing answered" not in found.title


def test_a_refused_connection_is_not_a_wrong_service():
    refused = ("[W1124 00:00:00.0 TCPStore.cpp:340] [c10d] TCP client failed to connect/validate to host node0:29501 - "
               "retrying (try=0, timeout=5000ms, delay=619ms): Connection refused")
    evidence = Evidence(nodes=[NodeEvidence(0, "node0", None), NodeEvidence(1, "node1", 1, lines=[refused])], nnodes=2,
                        master_addr="node0", master_port=29500, timed_out=True)
    assert "wrong-service-on-port" not in [finding.cause for finding in diagnose(evidence)]


@pytest.mark.parametrize("name, names", [("ddp_unused_parameter", "parameter indices 2 3"),
                                         ("ddp_unused_parameter_named", "aux_head.bias, aux_head.weight")])
def test_parameters_without_a_gradient_are_named_with_the_fix(name, names):
    found = top(name)
    assert found.cause == "ddp-unused-parameters" and names in found.title
    assert "find_unused_parameters=True" in found.fix and "remove" in found.fix


def test_models_that_differ_between_ranks_say_which_rank_and_shape():
    found = top("ddp_model_mismatch")
    assert (found.cause, found.node, found.rank) == ("ddp-parameter-mismatch", 1, 1)
    assert "rank 1's params[0] is [32, 8], not the shape rank 0 has" in found.title
    assert "same model on every rank" in found.fix


def test_shared_memory_that_ran_out_is_named():
    found = top("shared_memory_full")
    assert found.cause == "shared-memory-exhausted" and "/dev/shm" in found.title
    assert "num_workers" in found.fix and "file_system" in found.fix


@pytest.mark.parametrize("line", [
    "OSError: [Errno 28] No space left on device: '/lab/shared/checkpoints/step100.pt'",
    "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed writing file data/0: "
    "file write failed",
])
def test_a_full_disk_is_not_shared_memory(line):
    evidence = Evidence(nodes=[NodeEvidence(0, "node0", 1, lines=["Traceback (most recent call last):",
                                                                   '  File "/x/train.py", line 3, in <module>', line])],
                        nnodes=1)
    assert "shared-memory-exhausted" not in [finding.cause for finding in diagnose(evidence)]


@pytest.mark.parametrize("name, says", [("local_rank_as_rank", "not LOCAL_RANK"),
                                        ("repeated_node_rank", "a different node rank on each node")])
def test_two_processes_that_claim_one_rank_are_named_not_a_port(name, says):
    found = top(name)
    assert found.cause == "duplicate-rank"
    assert "all 2 processes (node0, node1) reached the rendezvous, yet rank 1 never did" in found.title
    assert says in found.fix and "MASTER_PORT" not in found.fix


def test_a_rank_that_never_came_is_not_a_duplicate():
    """The same wait, but only node0's process reached it (node1's never started or is still busy): ranks-missing."""
    evidence = sample("repeated_node_rank")
    evidence.nodes[1].lines = ["loading the index ..."]
    evidence.nodes[1].exit_code = None
    assert "duplicate-rank" not in [finding.cause for finding in diagnose(evidence)]


def test_a_rank_alive_but_late_is_named_with_where_it_was():
    found = top("late_rank", stopped="node0 failed")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: still in load_index (") and "late_rank.py:16" in found.title
    assert "timeout" in found.fix and "run it again" not in found.fix


def test_without_its_stack_a_missing_rank_is_not_called_late():
    evidence = sample("late_rank", stopped="node0 failed")
    evidence.processes = []
    assert "late-rank" not in [finding.cause for finding in diagnose(evidence)]
