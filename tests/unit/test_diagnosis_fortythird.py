"""The forty-third held-out batch's mended misses (bench/diagnosis/FORTYTHIRD_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortythird_apex_dqn_actors", "zero-at-this-world-size",
     ["`num_actors - 1` (apex_dqn_actors.py:21) comes to 0 at this run's world size of 2"],
     ["guard the divisor (max(num_actors - 1, 1))"]),
    ("fortythird_r2d2_recurrent_learner", "joined-along-the-wrong-dim",
     ["`torch.cat(g_h0)` (r2d2_recurrent_learner.py:68) joins the ranks' gathered parts along dim 0",
      "[2, 8, 32] came where [1, 16, 32] was expected"], ["torch.cat(g_h0, dim=1)"]),
    ("fortythird_lander_ppo_rollouts", "variance-by-cancellation",
     ["`torch.sqrt(self.var + 1e-08)` (lander_ppo_rollouts.py:46)"], ["(count, mean, M2)"]),
    ("fortythird_train_grid_load_forecaster", "variance-by-cancellation",
     ["`var.sqrt()` (train_grid_load_forecaster.py:39)"], ["accumulate in float64"]),
    ("fortythird_negative_pool_builder", "shape-mismatch",
     ["receives into `recv_ids`, made the size of what this rank sends (`torch.empty_like(send_ids)`, line 39)"],
     ["torch.empty(int(sum(output_split_sizes))"]),
    ("fortythird_shard_recall_eval", "split-sizes-of-floats",
     ["the .tolist() of a float tensor (`torch.histc(owner.float()"], ["torch.bincount(owner, minlength=world)"]),
    ("fortythird_hashed_feature_router", "owner-product-wrapped",
     ["`keys * world >> KEY_BITS` (hashed_feature_router.py:53)", "at a world of 4 the product passes 2**63"],
     ["keys // ((1 << 62) // world)"]),
    ("fortythird_rowwise_embedding_trainer", "bucketized-to-the-rank-before",
     ["`torch.bucketize(ids, self.boundaries)` (rowwise_embedding_trainer.py:38)", "right=False (the default)"],
     ["right=True"]),
    ("fortythird_rolling_origin_backtest", "object-not-picklable",
     ["broadcast_object_list at rolling_origin_backtest.py:62", "a TorchScript module"],
     ["torch.jit.save it into an io.BytesIO"]),
    ("fortythird_lagged_ensemble_forecaster", "object-not-picklable",
     ["all_gather_object at lagged_ensemble_forecaster.py:65", "a module with a parametrization"],
     ["send the module's state_dict()"]),
    ("fortythird_reconcile_regional_forecasts", "group-ranks-repeated",
     ["gives new_group the ranks `(owner[s] for s in stores)` (line 50)"], ["sorted(set(...))"]),
    ("fortythird_impala_multigame", "index-from-other-ranks",
     ["`act[..., None]` (impala_multigame.py:97) holds values the other ranks sent (through `parts`)",
      "3, is past the 3 this rank's own tensor holds"], ["size what the received values index for every rank's range"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortythird_apex_dqn_actors", "num_actors = world - 1", "num_actors = world + 1", "zero-at-this-world-size"),
    ("fortythird_r2d2_recurrent_learner", "state = (torch.cat(g_h0), torch.cat(g_c0))",
     "state = (torch.cat(g_h0, dim=1), torch.cat(g_c0, dim=1))", "joined-along-the-wrong-dim"),
    ("fortythird_train_grid_load_forecaster", "var = sq / n - mean * mean", "var = sq / n",
     "variance-by-cancellation"),
    ("fortythird_shard_recall_eval", "torch.histc(owner.float(), bins=world, min=0, max=world - 1)",
     "torch.bincount(owner, minlength=world)", "split-sizes-of-floats"),
    ("fortythird_hashed_feature_router", "(keys * world) >> KEY_BITS", "keys // ((1 << KEY_BITS) // world)",
     "owner-product-wrapped"),
    ("fortythird_rowwise_embedding_trainer", "torch.bucketize(ids, self.boundaries)",
     "torch.bucketize(ids, self.boundaries, right=True)", "bucketized-to-the-rank-before"),
    ("fortythird_impala_multigame", "dist.gather(traj, parts, dst=0)", "parts = [traj for _ in range(world)]",
     "index-from-other-ranks"),
]


def test_a_gathered_list_chosen_by_the_rank_is_no_position_computed_from_it():
    """`parts = [torch.zeros(...) for _ in range(world)] if rank == 0 else None` picks by the rank, and
    `rank, world = get_rank(), get_world_size()` gives world nothing of the rank: neither is an offset into a shard
    (global-index-on-shard, with its index-translation fix, was told here and could not help)."""
    assert "global-index-on-shard" not in causes(sample("fortythird_impala_multigame"))


def test_a_receive_buffer_sized_from_the_counts_is_not_told_as_sized_from_the_send():
    changed = diagnose(with_source(sample("fortythird_negative_pool_builder"), "recv_ids = torch.empty_like(send_ids)",
                                   "recv_ids = torch.empty(int(recv_counts.sum()), dtype=torch.long)"))
    assert "made the size of what this rank sends" not in changed[0].title
