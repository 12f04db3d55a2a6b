"""The twenty-fifth held-out batch's mended misses (bench/diagnosis/TWENTYFIFTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.calls import Tensor
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyfifth_ddp_compressed_regressor", "half-sum-overflowed",
     ["the all_reduce at ddp_compressed_regressor.py:20 sums float16[1665] over 4 ranks with op SUM"],
     ["divide by the world size before the reduction"]),
    ("twentyfifth_eval_intent_classifier", "ratio-of-a-share",
     ["`hits / support` (eval_intent_classifier.py:41)", "`support = int((target == c).sum())`, line 39"],
     ["reduce the counts, not the ratios"]),
    ("twentyfifth_finetune_multinode_overrides", "option-spelled-otherwise",
     ["the command passes --node-rank, but finetune_multinode_overrides.py defines --node_rank"],
     ["add_argument('--node-rank', '--node_rank', dest=...)", "parse_args()"]),
    ("twentyfifth_train_with_run_folder", "script-not-found",
     ["a process of the job changed directory", "outputs/lm-base", "by a relative path"],
     ["os.path.abspath(sys.argv[0])"]),
    ("twentyfifth_tp_mlp_pretrain", "plain-tensor-into-dtensor",
     ["clip_grad_norm_ (or another norm over every gradient at once) got plain tensors and DTensors together"],
     ["compute the global norm per kind and combine"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyfifth_finetune_multinode_overrides", 'parser.add_argument("--node_rank"', 'parser.add_argument("--node-rank"',
     "option-spelled-otherwise"),  # the spelling the command passes
    ("twentyfifth_eval_intent_classifier", "recalls[name] = hits / support", "recalls[name] = hits / 0",
     "ratio-of-a-share"),  # a division by zero, not by a count of the share
]


def test_a_float32_sum_is_not_a_half_sum_that_overflowed():
    evidence = sample("twentyfifth_ddp_compressed_regressor")

    def widened(calls):
        return tuple(replace(call, tensors=(Tensor(call.tensors[0].shape, "float32"),)) if call.op == "all_reduce"
                     else call for call in calls)

    wide = with_calls(evidence, recent=widened(evidence.traces[0].calls.recent),
                      posted=widened(evidence.traces[0].calls.posted))
    assert "half-sum-overflowed" not in causes(wide)


def test_a_script_missing_where_no_process_changed_directory_is_still_a_copy_to_make():
    evidence = sample("twentyfifth_train_with_run_folder")
    stayed = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, cwd=trace.calls.started_in))
                                       if trace.calls else trace for trace in evidence.traces])
    top = diagnose(stayed)[0]
    assert top.cause == "script-not-found" and "changed directory" not in top.title
