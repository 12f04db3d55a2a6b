"""The twenty-ninth held-out batch's mended misses (bench/diagnosis/TWENTYNINTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

import shutil

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tools.docs_reference import SAMPLES, load_evidence
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyninth_item_tower_pooling_eval", "parts-joined-as-whole",
     ["(`all_offsets = torch.cat([p[1] for p in parts])`, line 41)",
      "each rank's `offsets` are positions into its own part (they start at 0)"],
     ["shift each rank's `offsets` by the number of items in the parts before it"]),
    ("twentyninth_hashed_feature_vocab_build", "parts-joined-as-whole",
     ["(`merged = torch.cat(parts)`, line 32)", "each rank's `local_sorted` is sorted on its own"],
     ["sort the joined parts again"]),
    ("twentyninth_popularity_negatives_pretrain", "share-smaller-than-needed",
     ["popularity_negatives_pretrain.py:56", "(`pop`)", "(`mine = users % world == rank`, line 44)",
      "with 4 ranks a share"], ["all_reduce the counts before normalising", "sample with replacement"]),
    ("twentyninth_forecast_window_trainer", "share-smaller-than-needed",
     ["every rank failed at `span = series.unfold(0, LOOKBACK + HORIZON, 1)`",
      "(`per_rank = series.shape[0] // world`, line 23)"],
     ["build the windows over the whole data and split the windows"]),
    ("twentyninth_stream_fbank_extract", "share-smaller-than-needed",
     ["stream_fbank_extract.py:48", "(`seg = audio.numel() // world`, line 37)"], ["split on whole blocks"]),
    ("twentyninth_loudness_normalize_corpus", "tensor-kind-unsupported",
     ["the all_reduce at loudness_normalize_corpus.py:41 was given int16 tensors"],
     ["cast to a type gloo takes before the all_reduce (tensor.to(torch.int32)"]),
    ("twentyninth_rowwise_embedding_export", "layouts-disagree",
     ["rowwise_embedding_export.py:37", "(`return ids % self.world`, line 28)",
      "(`self.offset = rank * self.rows`, line 20)"], ["owner = id // rows_per_rank", "local row = id // world"]),
    ("twentyninth_recall_eval_sharded_catalog", "global-index-on-shard",
     ["`scores.topk(args.k, dim=1)` (recall_eval_sharded_catalog.py:55) asks for k=args.k",
      "(`shard_ids, shard_emb = local_catalog(items, rank, world)`, line 45)"], ["k_local = min(args.k"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyninth_item_tower_pooling_eval", "(values, offsets, labels))", "(values, sizes, labels))",
     "parts-joined-as-whole"),  # lengths gathered, not positions
    ("twentyninth_hashed_feature_vocab_build", "merged = torch.cat(parts)", "merged = torch.unique(torch.cat(parts))",
     "parts-joined-as-whole"),  # sorted again as it is joined
    ("twentyninth_popularity_negatives_pretrain", "mine = users % world == rank", "mine = users >= 0",
     "share-smaller-than-needed"),  # every rank samples from the whole log
    ("twentyninth_forecast_window_trainer", "shard = local_span(series, rank, world)", "shard = series",
     "share-smaller-than-needed"),
    ("twentyninth_rowwise_embedding_export", "return ids % self.world", "return ids // self.rows",
     "layouts-disagree"),  # routed by blocks too
    ("twentyninth_recall_eval_sharded_catalog", "scores.topk(args.k, dim=1)",
     "scores.topk(min(args.k, scores.shape[1]), dim=1)", "global-index-on-shard"),  # k already fits the share
]


def test_a_share_rounded_up_is_not_told_as_too_small():
    """A share rounded up (math.ceil(n / world)) is too large, not too small: the rule that says so comes first."""
    evidence = with_source(sample("twentyninth_forecast_window_trainer"), "per_rank = series.shape[0] // world",
                           "per_rank = math.ceil(series.shape[0] / world)")
    assert diagnose(evidence)[0].cause != "share-smaller-than-needed"


def test_a_message_rule_that_declines_leaves_the_crash_to_the_other_mechanisms(tmp_path):
    """gloo's "Invalid scalar type" is read by the dtype rule; where the recorded calls show no dtype gloo lacks, that
    rule declines, and the crash is still told (as it was not when a matching pattern alone silenced it)."""
    copy = tmp_path / "sample"
    shutil.copytree(SAMPLES / "twentyninth_loudness_normalize_corpus", copy)
    for trace in (copy / "flight").iterdir():
        trace.write_text(trace.read_text().replace('"int16"', '"int32"').replace('"Short"', '"Int"'))
    found = diagnose(load_evidence(copy))[0]
    assert found.cause == "rank-crashed" and "Invalid scalar type" in found.title


def test_a_recording_no_rank_splits_is_not_told_as_a_share_too_small():
    """Neither a size divided by the world size nor a slice from a bound made from the rank: no share. (Both go: the
    dataflow follows names file-wide, and `start`, the segment's bound, is also the name of a loop's variable.)"""
    evidence = with_source(with_source(sample("twentyninth_stream_fbank_extract"), "seg = audio.numel() // world",
                                       "seg = audio.numel()"), "start = rank * seg", "start = 0")
    assert diagnose(evidence)[0].cause != "share-smaller-than-needed"

