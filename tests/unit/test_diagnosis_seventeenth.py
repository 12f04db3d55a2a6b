"""The seventeenth held-out batch's misses (bench/diagnosis/SEVENTEENTH_BATCH_A.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace

import pytest

from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("seventeenth_multitask_heads_finetune", "layers-in-unordered-loop",
     ["loop over tasks (multitask_heads_finetune.py:51)", "MultiTaskModel(tasks) at multitask_heads_finetune.py:82",
      "tasks = {ex['task'] for ex in train}", "a set's order"], ["sorted(tasks)"]),
    ("seventeenth_pipeline_lm_two_stage", "grad-of-non-leaf",
     ["read act.grad at pipeline_lm_two_stage.py:83", "`act = recv_buf.requires_grad_().view(", "not a leaf"],
     [".detach().requires_grad_()", "act.retain_grad()"]),
    ("seventeenth_train_price_regressor", "learning-rate-scaled-by-world",
     ["loss became inf", "`lr = cfg['base_lr'] * global_batch / cfg['reference_batch']` (line 68)",
      "`global_batch = cfg['batch_per_rank'] * world` (line 67)", "with 4 ranks", "no warm-up"],
     ["sqrt(world size)", "LinearLR", "clip_grad_norm_"]),
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


def test_layers_made_in_a_sorted_order_are_no_unordered_loop():
    evidence = sample("seventeenth_multitask_heads_finetune")
    ordered = with_source(evidence, "tasks = {ex[\"task\"] for ex in train}",
                          "tasks = sorted({ex[\"task\"] for ex in train})")
    assert causes(ordered)[0] == "ddp-parameter-mismatch"
    listed = with_source(evidence, "tasks = {ex[\"task\"] for ex in train}",
                         "tasks = list(dict.fromkeys(ex[\"task\"] for ex in train))")
    assert "layers-in-unordered-loop" not in causes(listed)


def test_the_grad_of_a_leaf_is_no_non_leaf_read():
    evidence = sample("seventeenth_pipeline_lm_two_stage")
    leaf = with_source(evidence, "act = recv_buf.requires_grad_().view(MICRO_BATCH, SEQ, HIDDEN)",
                       "act = recv_buf.view(MICRO_BATCH, SEQ, HIDDEN).detach().requires_grad_()")
    unwarned = with_log(leaf, "is not a leaf Tensor", "was read")
    assert "grad-of-non-leaf" not in causes(unwarned)
    # the source alone tells it, where torch's warning was not printed
    assert causes(with_log(evidence, "is not a leaf Tensor", "was read"))[0] == "grad-of-non-leaf"


def test_a_rate_not_scaled_or_a_loss_that_stayed_finite_is_no_scaled_rate():
    evidence = sample("seventeenth_train_price_regressor")
    unscaled = with_source(evidence, "global_batch = cfg[\"batch_per_rank\"] * world",
                           "global_batch = cfg[\"batch_per_rank\"]")
    assert "learning-rate-scaled-by-world" not in causes(unscaled)
    scaled_down = with_source(evidence, "global_batch = cfg[\"batch_per_rank\"] * world",
                              "global_batch = cfg[\"batch_per_rank\"] / world")
    assert "learning-rate-scaled-by-world" not in causes(scaled_down)
    other_error = with_log(replace(evidence, traces=[replace(trace, error=None) for trace in evidence.traces]),
                           "FloatingPointError: loss became inf", "ValueError: bad label 7")
    assert "learning-rate-scaled-by-world" not in causes(other_error)
