"""The fifty-first held-out batch's mended misses (bench/diagnosis/FIFTYFIRST_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fiftyfirst_batch_ramp_trainer", "share-not-a-multiple",
     ["`gbs // world` (batch_ramp_trainer.py:36) gave this rank 3", "groups of 2"],
     ["at every value it takes (each stage of a ramp)"]),
    ("fiftyfirst_spike_guard_trainer", "backward-skipped-on-own-test",
     ["`if guard.is_spike(loss.item()):` (spike_guard_trainer.py:59) skips `loss.backward()`"],
     ["all_reduce a flag with MAX"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fiftyfirst_spike_guard_trainer", "if guard.is_spike(loss.item()):", "if rank == 99:",
     "backward-skipped-on-own-test"),
]


def test_a_loss_divided_by_the_micro_batches_is_not_told_as_divided_by_the_world():
    """n_micro is worked out from the world size (gbs // world // MICRO_BS), but dividing by it averages the micro-
    batches, which DDP does not: the harmful top finding of this record before the mend. Without the values the hooks
    kept, the crash stays unexplained, and the rules that read the job's text for silent mistakes run."""
    unexplained = without_values(sample("fiftyfirst_batch_ramp_trainer"))
    assert causes(unexplained)[0] == "rank-crashed"
    assert "loss-divided-by-world-size" not in causes(unexplained)
    divided = with_source(unexplained, "tgt.reshape(-1)) / n_micro", "tgt.reshape(-1)) / world")
    assert "loss-divided-by-world-size" in causes(divided)


def without_values(evidence):
    return replace(evidence, traces=[replace(trace, failed_check=None) for trace in evidence.traces])
