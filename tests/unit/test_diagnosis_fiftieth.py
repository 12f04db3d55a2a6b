"""The fiftieth held-out batch's mended misses (bench/diagnosis/FIFTIETH_BATCH.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_compared_values import with_operand
from tests.unit.test_diagnosis_replicas import causes, sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fiftieth_group_metrics_merge", "state-dropped-by-getstate",
     ["GroupReport.__getstate__ (group_metrics_merge.py:28) leaves `_scores` out", "all_gather_object (line 57)"],
     ["drop it from __getstate__, or make it again in __setstate__"]),
    ("fiftieth_bootstrap_metric_ci", "count-returned-as-float",
     ["`n_global` is 2000.0, a float", "all_sum() (bootstrap_metric_ci.py:12)"], ["an int64 tensor"]),
    ("fiftieth_slice_calibration_report", "joined-not-added",
     ["holds 8 items where 4 were expected", "`merged.get(name, ()) + stats` (slice_calibration_report.py:44)"],
     ["tuple(x + y for x, y in zip(a, b))"]),
    ("fiftieth_intent_classifier_train", "collective-behind-a-rank-test",
     ["`len(ds)` under `if rank == 0:` (intent_classifier_train.py:67) runs __len__", "(all_reduce, line 28)"],
     ["compute the value on every rank before the branch"]),
    ("fiftieth_topic_label_map_finetune", "changed-in-place-on-some-ranks",
     ["save_label_map changes `labels` in place (`labels.append('<unk>')`", "`len(labels)`, line 67"],
     ["save_label_map(list(labels), ...)"]),
    ("fiftieth_semisup_prior_trainer", "autograd-collective-used-on-some-ranks",
     ["`dist_nn.all_reduce`, line 40", "joins the loss only where `unlabeled.any()` holds (line 70)"],
     ["keep `reg` in every rank's loss"]),
    ("fiftieth_snapshot_roundtrip_validator", "rank-state-in-a-fingerprint",
     ["`torch.get_rng_state()`", "`torch.manual_seed(1234 + rank)`, line 73"],
     ["fingerprint only what the ranks share"]),
    ("fiftieth_preemption_drill_trainer", "first-number-of-a-rank-name",
     ["`re.search('(\\\\d+)', name)` (preemption_drill_trainer.py:52)", "`f'worker{rank:02d}-step{step:06d}.pt'`"],
     ["parse the field by its name"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fiftieth_group_metrics_merge", 'state.pop("_scores")', 'state.pop("_cache", None)', "state-dropped-by-getstate"),
    ("fiftieth_bootstrap_metric_ci", "    return t.tolist() if len(values) > 1 else t.item()",
     "    return t.tolist() if len(values) > 1 else t", "count-returned-as-float"),
    ("fiftieth_intent_classifier_train", "    if rank == 0:\n        print(f\"class weights",
     "    if rank == 0:\n        pass\n    else:\n        pass\n    if True:\n        print(f\"class weights",
     "collective-behind-a-rank-test"),
    ("fiftieth_topic_label_map_finetune", "save_label_map(labels, ", "save_label_map(list(labels), ",
     "changed-in-place-on-some-ranks"),
    ("fiftieth_semisup_prior_trainer", "            if unlabeled.any():\n                loss = loss + PRIOR_WEIGHT * reg",
     "            loss = loss + PRIOR_WEIGHT * reg * unlabeled.any()\n            pass",
     "autograd-collective-used-on-some-ranks"),
    ("fiftieth_snapshot_roundtrip_validator", "torch.manual_seed(1234 + rank)", "torch.manual_seed(1234)",
     "rank-state-in-a-fingerprint"),
    ("fiftieth_preemption_drill_trainer", 're.search(r"(\\d+)", name)', 're.search(r"step(\\d+)", name)',
     "first-number-of-a-rank-name"),
]


def test_a_tuple_of_another_length_than_the_ranks_joined_is_not_told_as_joined():
    evidence = sample("fiftieth_slice_calibration_report")
    assert "joined-not-added" not in causes(with_operand(evidence, "merged[name]", length=5))


def test_an_attribute_error_on_an_empty_list_is_not_told_as_an_empty_share():
    assert "nothing-in-this-share" not in causes(sample("fiftieth_group_metrics_merge"))
