"""The thirty-fifth held-out batch's mended misses (bench/diagnosis/THIRTYFIFTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyfifth_train_keep_best", "file-missing-everywhere",
     ["checkpoints/epoch005-rank1.pt is on no node, but epoch005-rank0.pt is: the files are per rank",
      "rank 1's own is missing while rank 0's is there"], ["decide which ones together"]),
    ("thirtyfifth_two_phase_finetune", "unfrozen-after-ddp",
     ["`set_trainable(model.encoders(), True)` (two_phase_finetune.py:80) unfreezes parameters that were frozen "
      "(line 71) when DDP wrapped the model (line 72)"], ["wrap the model in DDP again after unfreezing"]),
    ("thirtyfifth_uncertainty_weighted_trainer", "reentrant-checkpoint-ddp",
     ["the job checkpoints no activations", "`model.module.weighted_loss(losses)` (uncertainty_weighted_trainer.py:75)"],
     ["use every parameter of the wrapped model inside its forward"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtyfifth_two_phase_finetune", "set_trainable(model.encoders(), True)", "set_trainable(model.encoders(), False)",
     "unfrozen-after-ddp"),  # never unfrozen
]


def test_a_parameter_marked_ready_twice_in_a_job_that_checkpoints_activations_is_told_as_checkpointing():
    evidence = with_source(sample("thirtyfifth_uncertainty_weighted_trainer"),
                           "total = model.module.weighted_loss(losses)",
                           "total = torch.utils.checkpoint.checkpoint(model.module.weighted_loss, losses)")
    assert "activation checkpointing that reruns the forward" in diagnose(evidence)[0].title
