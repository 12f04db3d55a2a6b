"""The twenty-eighth held-out batch's mended misses (bench/diagnosis/TWENTYEIGHTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyeighth_byol_pretrain", "ddp-without-trainable-parameters",
     ["DistributedDataParallel was given a module none of whose parameters requires a gradient"],
     ["wrap only the modules that train", "EMA-updated"]),
    ("twentyeighth_ppo_reward_normalizer", "sum-over-local-count",
     ["ppo_reward_normalizer.py:30 divides stats, all-reduced (summed over every rank), by n, which is this rank's "
      "own count"], ["all-reduce n too before dividing"]),
    ("twentyeighth_actor_weight_sync", "shape-mismatch",
     ["the ranks walk the model's tensors in two different lists", "(actor_weight_sync.py:40, parameters and buffers)",
      "(actor_weight_sync.py:46, parameters only)"], ["send and receive the same list in the same order"]),
    ("twentyeighth_prioritized_replay_learner", "global-index-on-shard",
     ["`idx` (prioritized_replay_learner.py:76) is a position over every rank's parts joined",
      "used on this rank's own part of size 512"], ["owner = index // part_size, local = index % part_size"]),
    ("twentyeighth_clip_pretrain_local_loss", "labels-offset-past-the-logits",
     ["the logits are this rank's own, and `n * rank` (line 38)"],
     ["do not offset the labels by the rank where the logits are the rank's own"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyeighth_ppo_reward_normalizer", "dist.all_reduce(stats)", "dist.all_reduce(stats); dist.all_reduce(n)",
     "sum-over-local-count"),  # the count reduced too
    ("twentyeighth_prioritized_replay_learner", "idx = torch.multinomial(probs, batch_size, replacement=True, generator=g)",
     "idx = torch.arange(batch_size)", "global-index-on-shard"),
    ("twentyeighth_clip_pretrain_local_loss", "labels = torch.arange(n) + n * rank", "labels = torch.arange(n)",
     "labels-offset-past-the-logits"),
]


def test_tensor_lists_walked_the_same_way_on_both_sides_are_not_told_as_two_lists():
    evidence = with_source(sample("twentyeighth_actor_weight_sync"), "for p in model.parameters():",
                           "for p in model.state_dict().values():")
    assert "two different lists" not in diagnose(evidence)[0].title
