"""The eighteenth held-out batch's misses (bench/diagnosis/EIGHTEENTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace

import pytest

from lab.analysis.diagnosis import diagnose
from lab.analysis.diagnosis.crashes import message_advice
from lab.analysis.diagnosis.logs import LogLine, read_tracebacks

from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_held_out import assert_told
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
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


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
