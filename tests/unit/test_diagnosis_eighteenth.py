"""The eighteenth held-out batch's misses (bench/diagnosis/EIGHTEENTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.calls import CallLog, DistCall
from lab.analysis.diagnosis import Evidence, NodeEvidence, diagnose
from lab.analysis.diagnosis.crashes import message_advice
from lab.analysis.diagnosis.logs import LogLine, read_tracebacks
from lab.analysis.stacks import ProcessStack

from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_reasoning import ranks, top
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("eighteenth_contrastive_pretrain", "autograd-gradient-shape",
     ["the backward of GatherLayer (contrastive_pretrain.py:11)", "what all 4 ranks gathered ([64, 16])",
      "this rank's part only ([16, 16])", "its forward gathers across ranks"],
     ["dist.all_reduce(g)", "return g[rank * n:(rank + 1) * n]", "torch.distributed.nn.functional.all_gather"]),
    ("eighteenth_ctr_embedding_train", "tensor-kind-unsupported",
     ["was given sparse tensors", "ctr_embedding_train.py:15: nn.Embedding(NUM_USERS, DIM, sparse=True)",
      "ctr_embedding_train.py:46 in sync"], ["g.is_sparse", "to_dense()", "sparse=False"]),
    ("eighteenth_retrieval_eval", "tensor-kind-unsupported",
     ["the collective allgather was given quantized tensors", "retrieval_eval.py:27: torch.quantize_per_tensor("],
     ["q.int_repr()", "q.q_scale()", "dequantize()"]),
    ("eighteenth_tp_generate", "not-traceable-by-compile",
     ["torch.compile cannot trace the torch.distributed call `dist.broadcast(next_tok, src=0)`",
      "tp_generate.py:77 in decode_step", "compiled with fullgraph=True at tp_generate.py:80"],
     ["torch.distributed._functional_collectives", "drop fullgraph=True", "out of the compiled function"]),
    ("eighteenth_intent_classifier_finetune", "collective-while-handling-error",
     ["rank 1 raised IndexError: Target 14 is out of bounds. at intent_classifier_finetune.py:51 in train",
      "in its except Exception (line 72)", "called barrier at intent_classifier_finetune.py:40 in save_rescue",
      "rank 0 in its own code"], ["fix what raised it", "no collective in an except or finally block"]),
    ("eighteenth_regression_elastic_drill", "error-swallowed-exit-0",
     ["rank 0 caught the error of its all_reduce at regression_elastic_drill.py:33",
      "the except at regression_elastic_drill.py:70 calls sys.exit(0)", "exit barrier",
      "instead of restarting the workers (--max-restarts 2)"], ["re-raise it (or exit non-zero)"]),
    ("eighteenth_launch_embedding_sweep", "launch-options-differ",
     ["different --rdzv-id (node0 embsweep-6e7e4dc8, node1 embsweep-9af151f6)"], ["made once and passed to every node"]),
    ("eighteenth_recsys_snapshot_trainer", "forked-after-process-group",
     ["rank 0 on node0 waits at Snapshotter.wait", "`_, status = os.waitpid(self.child, 0)`",
      "which it forked (recsys_snapshot_trainer.py:47) after init_process_group", "it hangs as it exits"],
     ["multiprocessing.get_context('spawn')", "os._exit(0)"]),
]


def test_a_gradient_of_another_shape_than_the_world_size_explains_is_told_as_a_wrong_shape_only():
    evidence = with_log(sample("eighteenth_contrastive_pretrain"), "got [64, 16]", "got [16, 8]")
    top = diagnose(evidence)[0]
    assert top.cause == "autograd-gradient-shape"
    assert "returns a gradient shaped [16, 8] for its input #0, which is shaped [16, 16]" in top.title
    assert "ranks gathered" not in top.title and "each shaped like that input" in top.fix


def test_sparse_tensors_the_code_does_not_make_are_named_without_a_place():
    evidence = with_source(sample("eighteenth_ctr_embedding_train"), "sparse=True", "sparse=False")
    top = diagnose(evidence)[0]
    assert top.cause == "tensor-kind-unsupported" and "(made at" not in top.title


def test_a_dispatch_key_of_no_kind_the_lab_knows_is_left_to_the_crash():
    old, new = "from the 'QuantizedCPU' backend", "from the 'XLA' backend"
    evidence = with_log(sample("eighteenth_retrieval_eval"), old, new)
    evidence = replace(evidence, traces=[replace(trace, error=trace.error.replace(old, new) if trace.error else None)
                                         for trace in evidence.traces])
    assert "tensor-kind-unsupported" not in causes(evidence)


def test_a_link_to_visit_or_a_bug_to_report_is_not_given_as_the_messages_advice():
    message = ("Could not run 'c10d::allgather_' with arguments from the 'QuantizedCPU' backend. If you are a "
               "Facebook employee using PyTorch on mobile, please visit https://example.invalid/x for possible "
               "resolutions. Please file an issue if this is unexpected. Consider passing a dense tensor instead.")
    assert message_advice(message) == "Consider passing a dense tensor instead."


def test_an_exception_whose_class_name_says_nothing_of_an_error_is_read_after_the_frames():
    texts = ["Traceback (most recent call last):", '  File "/w/job.py", line 86, in main',
             "    tokens = step(tokens)", "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped",
             "  Explanation: Dynamo does not know how to trace it", "INFO: not an exception"]
    found = read_tracebacks([LogLine(0, 0, text) for text in texts])
    assert [(tb.exc_type, tb.message) for tb in found] == [
        ("torch._dynamo.exc.Unsupported", "Attempted to call function marked as skipped")]
    assert read_tracebacks([LogLine(0, 0, text) for text in ["INFO: started", "step: 3"]]) == []


def test_code_torch_compile_cannot_trace_outside_torch_distributed_is_named_without_the_collectives():
    log = ["Traceback (most recent call last):", '  File "/w/infer.py", line 30, in <module>', "    step(x)",
           "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped", "", "from user code:",
           '   File "/w/infer.py", line 12, in step', "    stamp = time.perf_counter_ns()"]
    nodes = [NodeEvidence(index, f"node{index}", 1, lines=log) for index in (0, 1)]
    top = diagnose(Evidence(nodes=nodes, nnodes=2, master_addr="node0"))[0]
    assert top.cause == "not-traceable-by-compile"
    assert "cannot trace `stamp = time.perf_counter_ns()` at infer.py:12 in step" in top.title
    assert "torch.distributed" not in top.title and "torch.compiler.disable" in top.fix


def barrier_while_handling(caller: str = "train.py:40 in rescue") -> CallLog:
    return CallLog(pending=(DistCall("barrier", caller=caller, handling="IndexError: Target 14 is out of bounds.",
                                     handling_raised_at="train.py:51 in step"),))


def test_a_collective_called_while_handling_an_error_is_told_where_the_other_ranks_went_on():
    ddp = CallLog(pending=(DistCall("all_reduce", caller="train.py:53 in step"),))
    found = top(ranks(ddp, barrier_while_handling(), exit_code=None, timed_out=True))
    assert (found.cause, found.rank) == ("collective-while-handling-error", 1)
    assert "rank 1 raised IndexError: Target 14 is out of bounds. at train.py:51 in step" in found.title
    assert "rank 0 waits in all_reduce" in found.title


def test_every_rank_handling_the_same_error_in_the_same_call_is_not_this_cause():
    hung = ranks(barrier_while_handling(), barrier_while_handling(), exit_code=None, timed_out=True)
    assert "collective-while-handling-error" not in causes(hung)


def test_a_rank_whose_error_ended_it_after_its_peer_failed_swallowed_nothing():
    evidence = sample("eighteenth_regression_elastic_drill")
    raised = replace(evidence, traces=[replace(trace, exception="RuntimeError") if trace.rank == 0 else trace
                                       for trace in evidence.traces])
    assert "error-swallowed-exit-0" not in causes(raised)


def test_nodes_that_launched_with_the_same_rendezvous_id_differ_in_nothing_the_lab_names():
    evidence = sample("eighteenth_launch_embedding_sweep")
    same = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, launch={
        **trace.calls.launch, "run_id": "embsweep-1"})) if trace.calls and trace.calls.launch else trace
        for trace in evidence.traces])
    assert "launch-options-differ" not in causes(same)


def test_a_child_that_runs_another_program_is_not_a_fork_of_the_process_group():
    evidence = sample("eighteenth_recsys_snapshot_trainer")
    spawned = replace(evidence, processes=[replace(process, cmdline=["/usr/bin/gzip", "snapshot.pt"])
                                           if process.rank is None and process.role == "process" else process
                                           for process in evidence.processes])
    assert "forked-after-process-group" not in causes(spawned)


def test_an_agents_command_line_is_not_compared_with_another_agents_recorded_settings():
    """One node's agent known from its stack (its command line, with --master-addr), the other from the hooks'
    record of its launch (no such option): two forms of the settings, not settings that differ."""
    evidence = sample("eighteenth_launch_embedding_sweep")
    agent = ProcessStack(1, 4242, "agent", None, None, {}, cmdline=[
        "/opt/lab-venv/bin/python", "-m", "torch.distributed.run", "--nnodes", "2", "--master-addr", "node0",
        "--rdzv-id", "embsweep-9af151f6", "job.py"])
    mixed = replace(evidence, processes=[*evidence.processes, agent])
    assert "launch-options-differ" not in causes(mixed)
