"""The twenty-seventh held-out batch's mended misses (bench/diagnosis/TWENTYSEVENTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.calls import Tensor
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyseventh_tokenize_jsonl_shards", "split-mid-record",
     ["rank 1 seeks to a byte offset made from its rank (`f.seek(start)`, line 37)"],
     ["discard the partial line"]),
    ("twentyseventh_minhash_dedup", "tensor-kind-unsupported",
     ["the all_gather at minhash_dedup.py:63 was given uint64 tensors"], ["tensor.view(torch.int64)"]),
    ("twentyseventh_extract_features_merge", "numpy-value-in-json",
     ["json refused a NumPy int64"], ["int(x)", ".item()"]),
    ("twentyseventh_gpipe_classifier_train", "p2p-deadlock",
     ["rank 0 waits at gpipe_classifier_train.py:71 in main to receive from rank 1",
      "rank 1 waits at another line, gpipe_classifier_train.py:52 in main", "rank 0: 12 sends"],
     ["the same number of times", "torch.tensor_split(x, n)"]),
    ("twentyseventh_lm_pipeline_pretrain", "split-drops-remainder",
     ["rank 3, the last, failed with its part from `stage = stage_for(rank, world)` (line 50)",
      "`layers[rank * per_stage:(rank + 1) * per_stage]` (line 36)"], ["bounds from the whole count"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyseventh_tokenize_jsonl_shards", "f.seek(start)", "f.seek(0)", "split-mid-record"),  # from the start
    ("twentyseventh_lm_pipeline_pretrain", "owned = layers[rank * per_stage:(rank + 1) * per_stage]",
     "owned = layers[rank * per_stage:]", "split-drops-remainder"),  # the last rank takes the rest
]


def test_an_invalid_scalar_type_with_no_unsigned_tensor_recorded_is_not_told_as_one():
    evidence = sample("twentyseventh_minhash_dedup")
    signed = with_calls(evidence, failed=tuple(
        replace(call, tensors=tuple(Tensor(tensor.shape, "int64") for tensor in call.tensors))
        for call in evidence.traces[0].calls.failed))
    assert "uint64" not in " ".join(finding.title for finding in diagnose(signed))


def test_ranks_that_wait_at_one_line_are_a_plain_receive_first_deadlock():
    """The same record with both ranks' waits at one line (an exchange both start by receiving): reordering is the
    fix, not the counts."""
    evidence = sample("twentyseventh_gpipe_classifier_train")
    def at_52(calls):
        return tuple(replace(call, caller="gpipe_classifier_train.py:52 in main") if call.op == "recv" else call
                     for call in calls)

    one_line = replace(evidence, traces=[replace(trace, calls=replace(
        trace.calls, pending=at_52(trace.calls.pending), failed=at_52(trace.calls.failed)))
        if trace.calls else trace for trace in evidence.traces])
    top = diagnose(one_line)[0]
    assert top.cause == "p2p-deadlock" and "each waits for the other" in top.title


def test_the_last_ranks_part_made_by_a_long_assignment_is_still_traced_to_its_split():
    """The assignment that calls the splitting function, longer than the 60 characters a finding quotes: the rule
    reads the statement itself, not its quoted text."""
    longer = with_source(sample("twentyseventh_lm_pipeline_pretrain"), "stage = stage_for(rank, world)",
                         "stage = stage_for(rank, world) if world > 1 else stage_for(rank, world)")
    assert diagnose(longer)[0].cause == "split-drops-remainder"
