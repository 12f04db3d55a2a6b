"""The thirty-sixth held-out batch's mended misses (bench/diagnosis/THIRTYSIXTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtysixth_ppo_actor_critic_update", "reentrant-checkpoint-ddp",
     ["two backward passes ran through one DDP forward (`policy_loss.backward(retain_graph=True)`, "
      "ppo_actor_critic_update.py:73"], ["run one backward per DDP forward"]),
    ("thirtysixth_grpo_group_advantages", "view-of-a-split",
     ["rank 1 reshaped `rewards`, its part of a split by the world size",
      "at `grouped = rewards.view(-1, NUM_GENERATIONS)` (grpo_group_advantages.py:63)"],
     ["split by whole groups of what the view makes"]),
]



def test_a_single_backward_is_not_told_as_two():
    """torch's message is the same for every way a parameter is marked ready twice: which way it was comes from the
    code, and without a retained graph there is no second backward to blame."""
    evidence = with_source(sample("thirtysixth_ppo_actor_critic_update"), "policy_loss.backward(retain_graph=True)",
                           "policy_loss.backward()")
    assert "two backward passes" not in diagnose(evidence)[0].title


def test_a_one_element_mean_is_not_told_as_sized_by_the_rank():
    """The KL all-reduced is `(...).mean().reshape(1)` over rollouts whose number follows from the rank: a mean has
    one size on every rank, so the mismatch is not its size (it is DDP's join shadowing the job's own collective)."""
    assert diagnose(sample("thirtysixth_ppo_kl_adaptive_epochs"))[0].cause != "size-from-rank-data"
