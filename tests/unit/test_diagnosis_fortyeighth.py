"""The forty-eighth held-out batch's mended misses (bench/diagnosis/FORTYEIGHTH_BATCH.md): each scored run's own
record (fit_categorical_encoder's from a run again with the hooks that count NaNs), with the cause and fix the lab must
now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyeighth_multihead_grad_monitor", "shape-mismatch",
     ["all_reduce at multihead_grad_monitor.py:41 runs inside `hook`", "registered with register_hook (line 36)"],
     ["make no collective inside a hook", "reduce all of them as one tensor at the same point on every rank"]),
    ("fortyeighth_multitask_trainer", "wrapped-when-first-needed",
     ["`DDP(heads[task])` (multitask_trainer.py:59)", "`if task not in ddp_heads`"],
     ["wrap every module once, before the loop, in the same order on every rank"]),
    ("fortyeighth_task_sampler_dwa", "mean-of-an-empty-share",
     ["`weights` held NaN", "`sum_loss / count` (line 83)", "a category the share holds none of gives 0/0"],
     ["all_reduce the sums and `count` over the ranks before dividing"]),
    ("fortyeighth_gbdt_histogram_trainer", "shape-mismatch",
     ["`hists` is made from `active`", "skips where `idx.numel() == 0` (line 62)"],
     ["keep every item on every rank (a zero entry where a rank has none of it)"]),
    ("fortyeighth_screen_features", "shape-mismatch",
     ["made from `keep`", "keeps only where `np.ptp(table[:, j]) > 0` (line 30)"],
     ["filter the same way everywhere"]),
    ("fortyeighth_fit_categorical_encoder", "nothing-in-this-share",
     ["`cats[:, j]` held only NaN (3000 of 3000)", "rank 0 raised ValueError"],
     ["safe for a share with nothing in it", "split so that every rank's share holds some"]),
    ("fortyeighth_select_uncertain_items", "index-made-float",
     ["`chosen` is float32 where it indexes", "`torch.tensor(r_ids)` (line 59)", "torch.tensor([]) is float32"],
     ["torch.tensor(..., dtype=torch.long)"]),
    ("fortyeighth_acquire_batch_quota", "shares-rounded-apart",
     ["found tensors of 24 and 25 items", "`quota = round(BUDGET * share)`, line 52"],
     ["largest remainders"]),
    ("fortyeighth_committee_vote_sync", "ragged-parts-stacked",
     ["made one tensor of what every rank gave a gather (`torch.tensor(gathered)`"],
     ["[item for part in gathered for item in part]"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyeighth_multitask_trainer", "        if task not in ddp_heads:\n            ddp_heads[task] = DDP(heads[task])",
     "        ddp_heads[task] = ddp_heads[task]", "wrapped-when-first-needed"),
    ("fortyeighth_task_sampler_dwa", "        history.append(sum_loss / count)",
     "        dist.all_reduce(sum_loss)\n        dist.all_reduce(count)\n        history.append(sum_loss / count)",
     "mean-of-an-empty-share"),
    ("fortyeighth_select_uncertain_items", "torch.tensor(r_ids)", "torch.tensor(r_ids, dtype=torch.long)",
     "index-made-float"),
    ("fortyeighth_acquire_batch_quota", "quota = round(BUDGET * share)", "quota = largest_remainder(share)",
     "shares-rounded-apart"),
]


def title_after(name: str, was: str, now: str) -> str:
    return diagnose(with_source(sample(name), was, now))[0].title


def test_a_collective_outside_any_hook_is_not_told_as_made_inside_one():
    assert "runs inside" not in title_after("fortyeighth_multihead_grad_monitor",
                                            "model.heads[t].weight.register_hook(self._make_hook(t))",
                                            "self._make_hook(t)")


def test_a_list_kept_whole_is_not_told_as_filtered_and_a_dtype_the_code_fixes_is_not_told_as_differing():
    unfiltered = title_after("fortyeighth_gbdt_histogram_trainer", "            if idx.numel() == 0:\n"
                             "                continue\n", "            pass\n            pass\n")  # lines kept
    assert "skips where" not in unfiltered
    # without the filter the sizes still differ, and the byte counts are not read as another dtype: the code builds
    # every histogram as float64
    assert "different sizes to all_reduce" in unfiltered and "dtype" not in unfiltered
    # a test of the rank is the same code's choice on every rank, not the data's
    assert "keeps only where" not in title_after("fortyeighth_screen_features", "if np.ptp(table[:, j]) > 0:",
                                                 "if j != rank:")


def test_a_share_that_holds_values_is_not_told_as_empty():
    evidence = sample("fortyeighth_fit_categorical_encoder")
    counted = replace(evidence, traces=[replace(trace, failed_check=trace.failed_check and replace(
        trace.failed_check, operands=tuple(replace(operand, nan=operand.nan and operand.nan - 1)
                                           for operand in trace.failed_check.operands))) for trace in evidence.traces])
    assert "nothing-in-this-share" not in [finding.cause for finding in diagnose(counted)]
