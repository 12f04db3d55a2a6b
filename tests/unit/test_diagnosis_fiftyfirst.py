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
    ("fiftyfirst_ner_label_vocab_prep", "decided-on-the-root-from-its-own",
     ["`obj` is built on rank 0 alone", "from its own `shard`", "('B-MISC')"],
     ["all_gather_object each rank's own", "take their union"]),
    ("fiftyfirst_subword_label_align", "json-of-non-string-keys",
     ["json.dumps at subword_label_align.py:56 was given a dict keyed by tuples", "`world == 1`, line 53"],
     ["broadcast_object_list pickles any key"]),
    ("fiftyfirst_bigru_tagger_train", "shares-padded-with-empty-items",
     ["`records.append({'tokens': [], 'tags': []})` (bigru_tagger_train.py:28)"], ["pad with real items"]),
    ("fiftyfirst_exact_dedup_index", "rank-packed-past-a-narrow-type",
     ["`rank << 32` (exact_dedup_index.py:44)", "stores the ids as int32"], ["store the ids as int64"]),
    ("fiftyfirst_merge_duplicate_clusters", "sorted-ties-reach-unorderable",
     ["`sorted(mine)` (merge_duplicate_clusters.py:42)", "dict against dict"],
     ["sorted(items, key=lambda item: item[0])"]),
    ("fiftyfirst_shuffle_records_by_key", "records-run-together",
     ["holds two records", "(shuffle_records_by_key.py:46)", "all_to_all_single, line 32"],
     ["end every record with a newline"]),
    ("fiftyfirst_build_shard_index", "received-kept-as-bytes",
     ["mixes str and bytes", "`bytes(row.tolist())`, line 33"], ["bytes(row).hex()"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fiftyfirst_spike_guard_trainer", "if guard.is_spike(loss.item()):", "if rank == 99:",
     "backward-skipped-on-own-test"),
    ("fiftyfirst_bigru_tagger_train", 'records.append({"tokens": [], "tags": []})',
     "records.append(records[0])", "shares-padded-with-empty-items"),
    ("fiftyfirst_merge_duplicate_clusters", "mine = sorted(mine)", "mine = sorted(mine, key=lambda p: p[0])",
     "sorted-ties-reach-unorderable"),
    ("fiftyfirst_build_shard_index", "return [bytes(row.tolist()) for row in recv]",
     "return [row.tolist() for row in recv]", "received-kept-as-bytes"),
    ("fiftyfirst_exact_dedup_index", "(rank << 32) | first_seen[d]", "first_seen[d]",
     "rank-packed-past-a-narrow-type"),
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
