"""The fortieth held-out batch's mended misses (bench/diagnosis/FORTIETH_BATCH.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortieth_interleaved_trials_trainer", "group-wait-cycle",
     ["rank 0 waits in group 1's #4 all_reduce float[1604] (interleaved_trials_trainer.py:31) for rank 1",
      "rank 1 waits in group 2's #4 all_reduce float[1604] (interleaved_trials_trainer.py:31) for rank 0"],
     ["in a fixed order (by index, not starting from the rank's own)"]),
    ("fortieth_node_parallel_lr_sweep", "collective-on-the-world",
     ["`dist.all_reduce(t)` (node_parallel_lr_sweep.py:35) runs on the whole world",
      "in code that works on its group `self.group`"], ["dist.all_reduce(..., group=self.group)"]),
    ("fortieth_adahessian_regression", "ddp-double-backward",
     ["`loss.backward(create_graph=True)` (adahessian_regression.py:65)", "DDP does not support double backward"],
     ["keep the bare module"]),
    ("fortieth_shuffle_docs_by_key", "fmod-keeps-the-sign",
     ["`torch.fmod(hashes, world)` (shuffle_docs_by_key.py:37) keeps the sign"], ["torch.remainder(hashes, world)"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortieth_node_parallel_lr_sweep", "dist.all_reduce(t)", "dist.all_reduce(t, group=self.group)",
     "collective-on-the-world"),
    ("fortieth_adahessian_regression", "loss.backward(create_graph=True)", "loss.backward()", "ddp-double-backward"),
    ("fortieth_shuffle_docs_by_key", "torch.fmod(hashes, world)", "torch.remainder(hashes, world)",
     "fmod-keeps-the-sign"),
]


def test_ranks_waiting_in_two_groups_are_no_cycle_when_one_of_them_can_finish():
    """Rank 1 had reached group 1's collective too: rank 0's wait there can end, so nobody waits in a cycle."""
    evidence = sample("fortieth_interleaved_trials_trainer")
    moved = replace(evidence, traces=[replace(trace, groups_reached={**trace.groups_reached, "1": 4})
                                      if trace.rank == 1 else trace for trace in evidence.traces])
    assert "group-wait-cycle" not in causes(moved)
    assert diagnose(evidence)[0].cause == "group-wait-cycle"
