"""The twenty-second held-out batch's mended misses (bench/diagnosis/TWENTYSECOND_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

import pytest

from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentysecond_stream_pretokenized_shards", "empty-share-of-the-world",
     ["rank 3 got an empty or zero share", "`my_shards = SHARD_NAMES[rank::world]` (line 52)", "with 4 ranks"],
     ["as many shards as ranks or more"]),
    ("twentysecond_ema_classifier_finetune", "empty-share-of-the-world",
     ["`micro_batch = GLOBAL_BATCH // (world * GRAD_ACCUM)` (line 49)", "rounds down to 0"],
     ["derive the accumulation steps from the world size"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentysecond_stream_pretokenized_shards", "my_shards = SHARD_NAMES[rank::world]",
     "my_shards = SHARD_NAMES[3:]", "empty-share-of-the-world"),  # empty, but not by the world size
    ("twentysecond_ema_classifier_finetune", "micro_batch = GLOBAL_BATCH // (world * GRAD_ACCUM)",
     "micro_batch = GLOBAL_BATCH - 48", "empty-share-of-the-world"),  # 0, but not a share of the ranks
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


@pytest.mark.parametrize("name, was, now, cause", NOT_TOLD, ids=[case[0] for case in NOT_TOLD])
def test_the_record_changed_so_the_mechanism_did_not_happen_is_not_told_it(name, was, now, cause):
    assert cause not in causes(with_source(sample(name), was, now))


def test_a_host_of_the_jobs_own_that_does_not_resolve_is_not_the_rendezvous():
    """Rank 0 retried a metrics push to a gateway no node resolves ("Name or service not known", no host named)
    after the ranks had met in collectives: the rendezvous host resolved, so that is not the cause (it was the top
    finding on the first try: "the rendezvous host 'the rendezvous host' does not resolve")."""
    assert "master-addr-unresolvable" not in causes(sample("twentysecond_train_metrics_push"))
