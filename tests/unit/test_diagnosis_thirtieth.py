"""The thirtieth held-out batch's mended misses (bench/diagnosis/THIRTIETH_BATCH.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtieth_charge_model_eval", "ragged-parts-stacked",
     ["rank 0 stacked what every rank gave a gather (`torch.stack([p for p, _ in gathered])`, charge_model_eval.py:71"],
     ["join the parts end to end along the item dimension (torch.cat)"]),
    ("thirtieth_eval_detections_map", "nothing-to-join",
     ["rank 1 had nothing to join", "`self.det_scores` is filled only by `.append` (line 62, in update())"],
     ["start from an empty tensor of the right shape", "send a count of 0"]),
    ("thirtieth_eval_mask_quality", "tensor-kind-unsupported",
     ["the collective allgather was given nested tensors (made at eval_mask_quality.py:55"],
     ["pad the items to the largest shape (torch.nested.to_padded_tensor", "all_gather_object the list"]),
    ("thirtieth_augment_photometric_pipeline", "collective-in-transform",
     ["the collective allreduce ran inside a function that torch.func transforms (vmap at "
      "augment_photometric_pipeline.py:36", "at augment_photometric_pipeline.py:22 in global_channel_stats"],
     ["take the allreduce out of the transformed function"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtieth_charge_model_eval", "torch.stack([p for p, _ in gathered])", "torch.cat([p for p, _ in gathered])",
     "ragged-parts-stacked"),
    ("thirtieth_eval_detections_map", "self.det_scores, self.det_labels, self.det_tp = [], [], []",
     "self.det_scores, self.det_labels, self.det_tp = [torch.empty(0)], [torch.empty(0)], [torch.empty(0)]",
     "nothing-to-join"),  # every rank's lists hold something from the start
]


def test_a_rank_that_batches_its_own_shard_is_not_told_it_ignores_the_rank():
    """`shard[step:step + bs]` with `bs = GLOBAL_BATCH // world`: the batches of a share already taken by the rank."""
    assert diagnose(sample("thirtieth_energy_mpnn_train"))[0].cause != "share-ignores-rank"


def test_a_rounded_up_share_is_blamed_only_where_rounding_up_runs_past_the_data():
    """(16 + world - 1) // world over 2 ranks rounds nothing up, and the window is clipped with min(): the last rank's
    crash is something else. Over 15 items and unclipped, the last window runs past the end."""
    evidence = with_source(sample("thirtieth_eval_detections_map"), "= [], [], []",
                           "= [torch.empty(0)], [torch.empty(0)], [torch.empty(0)]")
    assert diagnose(evidence)[0].cause != "share-rounded-up"
    unclipped = with_source(with_source(evidence, "NUM_VAL = 16", "NUM_VAL = 15"),
                            "min(NUM_VAL, (rank + 1) * per_rank)", "(rank + 1) * per_rank")
    assert diagnose(unclipped)[0].cause == "share-rounded-up"
