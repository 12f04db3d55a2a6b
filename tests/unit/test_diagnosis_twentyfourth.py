"""The twenty-fourth held-out batch's mended misses (bench/diagnosis/TWENTYFOURTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.calls import FileOp
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentyfourth_zero_adamw_trainer", "state-consolidated-elsewhere",
     ["rank 1 called state_dict() of a ZeroRedundancyOptimizer whose state was consolidated to rank 0",
      "zero_adamw_trainer.py:30"], ["on rank 0 only"]),
    ("twentyfourth_sharded_ckpt_roundtrip", "file-missing-everywhere",
     ["wrote their files under their local rank (rank 2 on node1 wrote shard_00.pt",
      "read them under their global rank (rank 2 asked for shard_02.pt)"], ["name the files by the global rank"]),
    ("twentyfourth_dense_retrieval_recall", "global-index-on-shard",
     ["`torch.topk(scores, k=args.k, dim=1)` (dense_retrieval_recall.py:52) asks for k=args.k",
      "`lo, hi = (bounds[rank], bounds[rank + 1])`, line 46"], ["k_local = min(args.k"]),
    ("twentyfourth_eval_results_aggregator", "duplicate-rank",
     ["two processes registered the RPC name worker0", '`name = f"worker{local_rank}"`, eval_results_aggregator.py:65'],
     ["name each worker by its global rank"]),
    ("twentyfourth_sampled_passk_eval", "split-drops-remainder",
     ["`len(test_set) // world` (sampled_passk_eval.py:78)", "the remainder is in no share"],
     ["give the remainder to some shards"]),
    ("twentyfourth_token_stream_pretrain", "restored-another-ranks-state",
     ["rank 1 put back state from pretrain_state.pt, which rank 0 alone saved",
      "`load_state_dict` (token_stream_pretrain.py:40) refused it"], ["state_rank{rank}.pt", "each rank's own entry"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentyfourth_sampled_passk_eval", "[len(test_set) // world] * world", "[len(test_set) - 1, 0]",
     "split-drops-remainder"),  # lengths that do not add up, but not by a division by the ranks
    ("twentyfourth_dense_retrieval_recall", "k=args.k, dim=1", "k=min(args.k, hi - lo), dim=1",
     "global-index-on-shard"),  # k follows the share
]


def test_a_share_taken_by_a_parameter_that_is_given_the_rank_is_not_a_share_without_the_rank():
    """`docs[shard::num_shards]` in `def score_shard(shard, num_shards, ...)`, called with the rank: the share has
    the rank in it (the first try blamed it, over the RPC error that ended the run)."""
    assert "share-ignores-rank" not in causes(sample("twentyfourth_eval_results_aggregator"))


def test_a_zero_state_saved_without_any_consolidation_asks_for_it():
    evidence = with_source(sample("twentyfourth_zero_adamw_trainer"), "optimizer.consolidate_state_dict(to=0)", "pass")
    top = diagnose(evidence)[0]
    assert top.cause == "state-consolidated-elsewhere" and "nothing consolidated" in top.title
    assert "consolidate_state_dict(to=0) on every rank" in top.fix


def test_state_every_rank_saved_for_itself_is_not_another_ranks():
    """The same record where rank 1 had saved the file it loads: its own state, whatever it refused."""
    evidence = sample("twentyfourth_token_stream_pretrain")
    path = next(op.path for trace in evidence.traces for op in trace.calls.files if op.op == "load")
    own = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, files=(
        FileOp("save", path, "token_stream_pretrain.py:76 in main"), *trace.calls.files))) if trace.calls else trace
        for trace in evidence.traces])
    assert "restored-another-ranks-state" not in causes(own)


def test_a_file_another_rank_saved_that_this_rank_could_not_read_is_not_its_state():
    """The same record where rank 1's torch.load found no file (its node has its own disk): nothing was put back, so
    this is not another rank's state (the file rules tell where the file is)."""
    evidence = sample("twentyfourth_token_stream_pretrain")
    missing = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, files=tuple(
        replace(op, size=None, error="FileNotFoundError") if op.op == "load" else op for op in trace.calls.files)))
        if trace.calls and trace.rank == 1 else trace for trace in evidence.traces])
    assert "restored-another-ranks-state" not in causes(missing)
