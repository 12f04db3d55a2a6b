"""The failures that only appear across nodes, on the real logs of tests/failures/ scripts run on a 2-node lab
(tests/unit/diagnosis_samples/<script>/): each family named with its evidence and fix, and cases where each rule
must not fire."""

from dataclasses import replace
from pathlib import Path

import pytest

from lab.analysis.diagnosis import Evidence, NodeEvidence, diagnose
from lab.analysis.flight import load_traces
from lab.analysis.stacks import Frame, stacks_at_termination
from tools.docs_reference import load_evidence

SAMPLES = Path(__file__).parent / "diagnosis_samples"


def sample(name: str, exit_codes: dict[int, int] | None = None, **changes) -> Evidence:
    """The record's evidence as the docs and the other sample tests load it, with `changes` (and exit codes) applied."""
    evidence = load_evidence(SAMPLES / name)
    if exit_codes:
        changes["nodes"] = [replace(node, exit_code=exit_codes.get(node.index, node.exit_code)) for node in evidence.nodes]
    return replace(evidence, **changes)


def top(name: str, **changes):
    return diagnose(sample(name, **changes))[0]


def test_a_rank_that_finished_early_is_named_not_a_dead_peer():
    found = top("uneven_batches")
    assert (found.cause, found.node, found.rank) == ("uneven-collectives", 0, 0)
    assert found.title.startswith("node1 finished (exit 0) after printing 'rank 1: done after 3 batches' while node0 "
                                  "still waited for it in a collective at ")
    assert "uneven_batches.py:19" in found.title and "Join" in found.fix and "DistributedSampler" in found.fix
    assert "died" not in found.fix


def test_uneven_collectives_say_how_many_collectives_each_rank_ran():
    """The Flight Recorder each process wrote as it ended: rank 1 left after 8 all_reduces, rank 0 entered a 9th."""
    found = top("uneven_batches")
    assert ("collectives (Flight Recorder): rank 0 reached #9 all_reduce float[9], rank 1 reached #8 all_reduce "
            "float[9]") in found.evidence


def test_uneven_collectives_need_a_node_that_finished():
    """The same log, but node1 failed too (exit 1): no one left normally, so it is not divergence; the rank that ended
    with a status of its own is the one the lost connection follows from."""
    causes = [finding.cause for finding in diagnose(sample("uneven_batches", exit_codes={1: 1}))]
    assert "uneven-collectives" not in causes and causes[0] == "rank-exited"


def test_ranks_that_left_while_their_node_waited_for_the_others_are_named():
    """Under torchrun with 2 processes per node, node0's ranks finished a batch early; node0's torchrun (holding the
    rendezvous) then waited for node1's until the lab stopped it, so no node exited 0: each rank's recorder, written
    as it ended without an exception, says who left."""
    found = top("uneven_shards_per_node", nproc_per_node=2)
    assert (found.cause, found.node) == ("uneven-collectives", 1) and found.rank in (2, 3)
    assert found.title.startswith("rank 0 and rank 1 (node0) finished without an error while node1 rank ")
    assert "uneven_shards_per_node.py:24" in found.title and "Join" in found.fix
    assert "rank 0 reached #8 all_reduce float[9]" in found.evidence and "rank 2 reached #9" in found.evidence


def _traces_changed(name: str, **changes) -> list:
    return [replace(trace, **changes) if trace.node == 0 else trace
            for trace in load_traces(SAMPLES / name / "flight")]


@pytest.mark.parametrize("changes", [{"exception": "KeyError"}, {"reached": 9}],
                         ids=["an exception ended them", "they went as far as the waiting ranks"])
def test_ranks_that_did_not_leave_early_are_not_uneven(changes):
    """The same run, but node0's ranks ended by an exception (a crash, not a normal end), or their recorders reached
    the collective node1's ranks failed in: nothing says they ran fewer collectives."""
    evidence = sample("uneven_shards_per_node", nproc_per_node=2)
    evidence = replace(evidence, traces=_traces_changed("uneven_shards_per_node", **changes))
    assert "uneven-collectives" not in [finding.cause for finding in diagnose(evidence)]


def test_a_late_rank_under_torchrun_is_named_from_the_stack_it_wrote_as_torchrun_ended_it():
    """2 processes per node: rank 0 gave up in all_reduce and node0's torchrun ended rank 1 (busy reloading its shard)
    with SIGTERM at once, before the lab could look; rank 1's own dump says where it was."""
    found = top("slow_rank_mid_training_torchrun", nproc_per_node=2)
    assert (found.cause, found.node, found.rank) == ("late-rank", 0, 1)
    assert "still in reload_shard (" in found.title and "slow_rank_mid_training.py:13" in found.title
    assert "when rank 0 gave up waiting for it in all_reduce" in found.title


def test_stacks_written_at_sigterm_are_read_back():
    folder = SAMPLES / "slow_rank_mid_training_torchrun" / "flight"
    [stack] = stacks_at_termination(folder)
    assert (stack.node, stack.rank, stack.local_rank, stack.role, stack.at_sigterm) == (0, 1, 1, "worker", True)
    where = stack.waiting()
    assert not where.in_distributed_call and where.user_frame.function == "reload_shard"
    assert [frame.function for frame in stack.threads[0].frames][-2:] == ["<module>", "reload_shard"]
    assert "(its stack as torchrun ended it)" in stack.summary()


def test_a_rank_that_failed_of_its_own_is_not_a_late_rank():
    """The same run, but a rank also failed with an error of its own: that error is the cause; rank 1 was merely
    stopped wherever it was."""
    evidence = sample("slow_rank_mid_training_torchrun", nproc_per_node=2)
    crash = ["[rank2]:Traceback (most recent call last):",
             '[rank2]:  File "/lab/shared/train.py", line 11, in <module>',
             "[rank2]:KeyError: 'bird'"]
    nodes = [replace(node, lines=node.lines + crash) if node.index == 1 else node for node in evidence.nodes]
    causes = [finding.cause for finding in diagnose(replace(evidence, nodes=nodes))]
    assert "late-rank" not in causes and causes[0] == "rank-crashed", causes


def test_processes_a_script_spawned_on_every_node_with_ranks_from_0_are_repeated_ranks():
    """lab exec ran one process per node, each mp.spawn'ed 2 with rank = its index and world_size = 2 x NNODES (right):
    every node had a rank 0 and 1, rank 2 never came. Not a world size to shrink."""
    found = top("spawn_without_node_offset")
    assert (found.cause, found.node) == ("duplicate-rank", 0)
    assert found.title.startswith("all 4 processes (node0, node1) reached the rendezvous, yet rank 2 never did")
    assert "node_rank * K + index" in found.fix and "world_size=2" not in found.fix


def test_spawned_processes_asking_for_more_ranks_than_exist_are_a_world_size_mismatch():
    """The same run, but waiting for rank 4: more than the 4 processes the nodes started."""
    evidence = sample("spawn_without_node_offset")
    nodes = [replace(node, lines=[line.replace("/0/2", "/0/4") for line in node.lines]) for node in evidence.nodes]
    found = diagnose(replace(evidence, nodes=nodes))[0]
    assert found.cause == "world-size-mismatch" and "the run started 4 process(es)" in found.title, found


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


@pytest.mark.parametrize("name, says", [("local_rank_as_rank_hang", "not LOCAL_RANK"),
                                        ("repeated_node_rank_hang", "a different node rank on each node")])
def test_a_hang_where_two_processes_passed_one_rank_is_named_from_their_stacks(name, says):
    """The same mistakes with init_process_group's long default timeout: nothing is logged before the lab's
    timeout; the locals of init_process_group in each stack say what each process passed."""
    found = top(name, timed_out=True)
    assert (found.cause, found.node, found.rank) == ("duplicate-rank", 0, 0)
    assert found.title == "2 processes (node0, node1) passed rank 0 to init_process_group: they claim the same rank"
    assert found.evidence.count("init_process_group(rank=0, world_size=2)") == 2
    assert says in found.fix


def test_a_world_size_argument_larger_than_the_launch_is_named_from_the_stacks():
    found = top("world_size_argument", timed_out=True)
    assert (found.cause, found.node, found.rank) == ("world-size-mismatch", 0, 0)
    assert "passes world_size=3 to init_process_group, but the lab launched 2 process(es)" in found.title
    assert ("node0 pid 31901: init_process_group(rank=0, world_size=3) at world_size_argument.py:14; node1 pid 31917: "
            "init_process_group(rank=1, world_size=3)") in found.evidence
    assert "WORLD_SIZE" in found.fix


def test_ranks_of_their_own_and_the_world_launched_are_no_divergence():
    """The same hang seen with a world of 3 launched (the job spawns its own third process, say): neither a world
    size mismatch nor a duplicate rank; the ranks that did arrive claim 0 and 1."""
    causes = [finding.cause for finding in diagnose(sample("world_size_argument", timed_out=True, world_size=3))]
    assert "world-size-mismatch" not in causes and "duplicate-rank" not in causes and causes[0] == "timed-out"


def test_processes_spawned_per_node_are_counted_before_calling_the_world_too_large():
    """A launch of one command per node whose processes spawn more ranks each: as many in init_process_group as the
    world they ask for is no mismatch, even though the lab launched fewer commands."""
    evidence = sample("world_size_argument", timed_out=True)
    extra = [replace(process, pid=process.pid + 1) for process in evidence.processes]
    evidence.processes = evidence.processes + extra[:1]  # three processes asking for 3
    assert "world-size-mismatch" not in [finding.cause for finding in diagnose(evidence)]


def test_a_rank_alive_but_late_is_named_with_where_it_was():
    found = top("late_rank", stopped="node0 failed")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: still in load_index (") and "late_rank.py:16" in found.title
    assert "timeout" in found.fix and "run it again" not in found.fix


def test_a_rank_late_to_a_collective_is_named_with_where_it_was():
    found = top("slow_rank_mid_training", stopped="node0 failed")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: still in reload_shard (")
    assert found.title.endswith("when rank 0 gave up waiting for it in all_reduce")
    assert "Timed out waiting 5000ms for recv operation" in found.evidence and "prefetching" in found.fix


def test_a_collective_timeout_without_the_late_ranks_stack_is_not_called_late():
    evidence = sample("slow_rank_mid_training", stopped="node0 failed")
    evidence.processes = []
    causes = [finding.cause for finding in diagnose(evidence)]
    assert "late-rank" not in causes and causes[0] == "collective-timeout"


def test_a_rank_that_got_to_the_collective_after_the_timeout_is_named_from_the_flight_recorder():
    """Rank 1 prepared its data for 1.5 x the timeout before DDP's first collective; rank 0 gave up waiting there and
    rank 1 arrived afterwards (no stack: it was no longer busy when the run ended). When each entered says it."""
    found = top("late_past_the_timeout_torchrun")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: it reached #1 all_gather int64[1] at ")
    assert "late_past_the_timeout.py:27 7.3 s after rank 0 (node0), whose 5 s timeout for it had run out" in found.title
    assert "rank 0 entered #1 all_gather int64[1] and waited 5 s; rank 1 entered it 7.3 s later" in found.evidence
    assert "its last output: rank 1: prepared 64 rows" in found.evidence and "timeout" in found.fix


def test_a_rank_late_after_work_between_collectives_says_how_long_it_spent_there():
    found = top("checkpoint_past_the_timeout")
    assert (found.cause, found.node, found.rank) == ("late-rank", 0, 0)
    assert "reached #5 all_reduce float[16]" in found.title and "checkpoint_past_the_timeout.py:35" in found.title
    assert "7.5 s after its collective #4 all_reduce float[16]" in found.evidence


def _late_traces(change) -> list:
    return [replace(trace, **change(trace)) if trace.rank == 1 else trace
            for trace in load_traces(SAMPLES / "late_past_the_timeout_torchrun" / "flight")]


@pytest.mark.parametrize("change", [
    lambda trace: {"started_at": trace.history[0].entered_at},
    lambda trace: {"history": tuple(replace(call, entered_at=call.entered_at - 3) for call in trace.history)},
], ids=["a process started after the other entered (a restart)", "it arrived within the timeout"])
def test_a_rank_is_not_late_to_a_collective_it_could_not_have_been_waited_for(change):
    evidence = replace(sample("late_past_the_timeout_torchrun"), traces=_late_traces(change))
    assert "late-rank" not in [finding.cause for finding in diagnose(evidence)]


def test_a_rank_that_failed_of_its_own_after_arriving_late_is_a_crash():
    evidence = sample("late_past_the_timeout_torchrun")
    evidence.nodes[1].lines += ["[rank1]:Traceback (most recent call last):",
                                '[rank1]:  File "/work/late_past_the_timeout.py", line 28, in <module>',
                                "[rank1]:ValueError: expected 64 rows, got 63"]
    causes = [finding.cause for finding in diagnose(evidence)]
    assert "late-rank" not in causes and causes[0] == "rank-crashed", causes


def test_a_rank_still_dialling_the_rendezvous_after_the_other_gave_up_is_late():
    """Under torchrun: rank 1 verified its shard for 1.5 x the timeout, then dialled node0's store, gone with node0's
    agent; its stack when the lab stopped the run stands in init_process_group, dialling the address it was given."""
    found = top("late_join_past_the_timeout_torchrun", stopped="node0 failed")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: it reached init_process_group (")
    assert found.title.endswith("after node0 had given up waiting for it there, and still dialled node0:29500")
    assert "TCPStore connect node0:29500 (late_join_past_the_timeout.py:27)" in found.evidence


def test_a_rank_dialling_another_address_than_it_was_given_is_not_late():
    evidence = sample("late_join_past_the_timeout_torchrun", stopped="node0 failed")
    for process in evidence.processes:
        process.env["MASTER_PORT"] = "29501"  # what the lab gave differs from what the process dials
    assert "late-rank" not in [finding.cause for finding in diagnose(evidence)]


def test_a_rank_that_dialled_only_after_the_waiting_node_ended_is_late():
    """Under lab exec: rank 1's own connect timed out (c10d's line says when, and after how long), having started as
    node0, whose store waited for it, ended: late, not 'nothing answered'."""
    found = top("late_join_past_the_timeout", stopped="node0 failed")
    assert (found.cause, found.node, found.rank) == ("late-rank", 1, 1)
    assert found.title.startswith("rank 1 on node1 was alive but late: it dialled the rendezvous (node0:29500) only "
                                  "as node0, which had given up waiting for it there, ended (")
    assert "1/2 clients joined" in found.evidence and "join_timeout" in found.fix


@pytest.mark.parametrize("shift", [10.0, -3600.0], ids=["it dialled while the store was there",
                                                        "a node clock in another time zone"])
def test_a_rank_that_dialled_while_the_store_was_there_is_not_late(shift):
    evidence = sample("late_join_past_the_timeout", stopped="node0 failed")
    evidence.nodes[0].exited_at += shift
    causes = [finding.cause for finding in diagnose(evidence)]
    assert "late-rank" not in causes and causes[0] == "master-unreachable", causes


def test_without_its_stack_a_missing_rank_is_not_called_late():
    evidence = sample("late_rank", stopped="node0 failed")
    evidence.processes = []
    assert "late-rank" not in [finding.cause for finding in diagnose(evidence)]


def test_ranks_hung_in_different_collectives_are_named_from_their_flight_recorders():
    found = top("collective_mismatch_hang", timed_out=True)
    assert (found.cause, found.node, found.rank) == ("collective-mismatch", 0, 0)
    assert found.title == "the ranks wait in different collectives at #1 (all_reduce vs barrier)"
    assert found.evidence == ("rank 0 (node0) waits in #1 all_reduce float[1] (collective_mismatch.py:19); "
                              "rank 1 (node1) waits in #1 barrier (collective_mismatch.py:17)")


def _waiting(evidence: Evidence, rank: int, **changes) -> Evidence:
    """The evidence with rank `rank`'s live collective changed (its sequence number, sizes, ...), in its history too."""
    def changed(trace):
        now = replace(trace.waiting_in, **changes)
        return replace(trace, waiting_in=now, history=tuple(now if call.seq == trace.waiting_in.seq else call
                                                            for call in trace.history))
    evidence.traces = [changed(trace) if trace.rank == rank else trace for trace in evidence.traces]
    return evidence


def test_ranks_hung_at_different_sequence_numbers_are_out_of_step():
    evidence = _waiting(sample("collective_mismatch_hang", timed_out=True), 1, seq=3, operation="all_reduce",
                        sizes=((1,),), dtypes=("Float",))
    found = diagnose(evidence)[0]
    assert (found.cause, found.rank) == ("collective-mismatch", 0)
    assert found.title == "the ranks are out of step: rank 0 is 2 collective(s) behind the others"


def test_ranks_hung_in_one_collective_with_other_sizes_are_a_shape_mismatch():
    evidence = _waiting(sample("collective_mismatch_hang", timed_out=True), 1, operation="all_reduce",
                        sizes=((8,),), dtypes=("Float",))
    found = diagnose(evidence)[0]
    assert (found.cause, found.rank) == ("shape-mismatch", 0)
    assert "(#1 all_reduce float[1] vs #1 all_reduce float[8])" in found.title


def test_of_three_ranks_the_one_in_another_collective_is_named():
    evidence = sample("collective_mismatch_hang", timed_out=True)
    rank0 = next(trace for trace in evidence.traces if trace.rank == 0)
    evidence.traces = evidence.traces + [replace(rank0, rank=2, node=2, pid=rank0.pid + 1)]  # rank 2 is with rank 0
    found = diagnose(evidence)[0]
    assert (found.cause, found.rank) == ("collective-mismatch", 1)
    assert found.title == "the ranks wait in different collectives at #1 (barrier vs all_reduce)"


def test_ranks_whose_recorders_hold_different_calls_at_one_number_are_out_of_step():
    """Micro-batches packed per rank: at #7 rank 3 all-reduced a token count while ranks 1 and 2 all-reduced their
    gradients. gloo's size error alone reads like a shape bug; the recorders show two different calls."""
    found = diagnose(sample("uneven_micro_batches", nproc_per_node=2))
    assert "shape-mismatch" not in [finding.cause for finding in found]
    top = found[0]
    assert (top.cause, top.node, top.rank) == ("collective-mismatch", 1, 3)
    assert top.title == ("the ranks are out of step: at #7 rank 3 called all_reduce float[scalar] while rank 1 and "
                         "rank 2 called all_reduce float[8x4]: they ran different numbers of collectives before it")
    assert "loop whose length differs per rank" in top.fix and "micro-batches" in top.fix


def test_the_same_call_with_other_sizes_is_a_shape_mismatch_not_out_of_step():
    """The same recorders, but rank 3's #7 an all_reduce of the gradients' kind with other sizes: one call, two
    shapes, which is what gloo's size error then means."""
    evidence = sample("uneven_micro_batches", nproc_per_node=2)
    evidence.traces = [replace(trace, history=tuple(replace(call, sizes=((8, 5),)) if call.seq == 7 else call
                                                    for call in trace.history)) if trace.rank == 3 else trace
                       for trace in evidence.traces]
    assert [finding.cause for finding in diagnose(evidence)][0] == "shape-mismatch"


def test_ranks_hung_in_the_same_collective_are_no_mismatch_of_the_recorder():
    """All ranks in the same call: they wait for one that is not there; the recorder does not name an order bug."""
    evidence = _waiting(sample("collective_mismatch_hang", timed_out=True), 1, operation="all_reduce",
                        sizes=((1,),), dtypes=("Float",))
    found = diagnose(evidence)
    assert not any(finding.title.startswith(("the ranks wait in different collectives at #", "the ranks are out of "
                                             "step", "the ranks passed different tensors")) for finding in found)


def test_a_late_rank_blocked_in_a_lock_or_a_queue_is_blocked_not_slow():
    """The same record with rank 1's main thread inside threading's wait (a lock, an event, a thread's join): the
    rank was not computing, so a longer timeout cannot help; a rank in its own code (time.sleep, a loop) stays late."""
    evidence = sample("slow_rank_mid_training", stopped="node0 failed")
    assert "was alive but late" in diagnose(evidence)[0].title
    wait = Frame("Condition.wait", "/usr/lib/python3.11/threading.py", 327, "threading.py")
    processes = [replace(process, threads=[replace(thread, frames=[*thread.frames, wait]) if thread.name == "MainThread"
                                           else thread for thread in process.threads])
                 if process.rank == 1 and process.role == "worker" else process for process in evidence.processes]
    found = diagnose(replace(evidence, processes=processes))[0]
    assert (found.cause, found.rank) == ("late-rank", 1)
    assert "was blocked, not computing: in reload_shard" in found.title and "a lock, an event" in found.title
    assert "longer process-group timeout does not help" in found.fix


def test_spawned_ranks_ended_by_their_sibling_before_their_own_wait_are_still_told_as_claiming_one_rank():
    """Under load, the first of a node's spawned processes to time out makes mp.spawn end its sibling before that one
    prints its own store wait: one wait line in all. The hooks' records of every process, still in
    init_process_group under ranks 0, 1, 0, 1, say the same as four wait lines would."""
    evidence = load_evidence(Path(__file__).parent / "diagnosis_samples" / "spawned_ranks_killed_before_their_wait")
    assert sum("wait timeout" in line for node in evidence.nodes for line in node.lines) == 1
    top = diagnose(evidence)[0]
    assert (top.cause, top.node, top.rank) == ("duplicate-rank", 0, 0)
    assert "2 processes (node0, node1) passed rank 0 to init_process_group" in top.title
    assert "keys: /default_pg/0//cpu//0/2" in top.evidence and "node_rank * K + index" in top.fix
