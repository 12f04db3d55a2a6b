"""The forty-second held-out batch's mended misses (bench/diagnosis/FORTYSECOND_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortysecond_fedavg_local_adam", "optimizer-state-not-made",
     ["`state['exp_avg']` (fedavg_local_adam.py:70) reads opt's state before opt ever stepped",
      "the step (`local_train(model, opt, x, y, LOCAL_STEPS)`, line 61) runs only where `active` holds"],
     ["opt.state[p].get('exp_avg', torch.zeros_like(p))"]),
    ("fortysecond_fedavg_round_cohorts", "group-mismatch",
     ["new_group(..., use_local_synchronization=True) at fedavg_round_cohorts.py:56: only the members call it"],
     ["drop use_local_synchronization", "new_group must be called by all ranks"]),
    ("fortysecond_refresh_ivf_centroids", "collective-into-read-only",
     ["`dist.broadcast(centroids, src=0)` (refresh_ivf_centroids.py:64)", "`torch.from_numpy(centroids)`, line 37"],
     ["torch.from_numpy(...).clone()", "torch.empty(shape"]),
    ("fortysecond_shard_rerank_eval", "default-dtype-per-rank",
     ["`torch.set_default_dtype(torch.float64)` (shard_rerank_eval.py:31)", "runs only where `rank == 0` holds"],
     ["pass dtype= to the calls"]),
    ("fortysecond_knn_recall_eval", "module-name-rebound",
     ["`dist` is the module torch.distributed (imported at knn_recall_eval.py:11)",
      "`dist = torch.cdist(queries, block)` (line 45)", "finds a Tensor, not the module"], ["give the value its own name"]),
    ("fortysecond_build_embedding_index", "split-size-is-the-world",
     ["`torch.split(tokens, world)` (build_embedding_index.py:40) cuts it into pieces of `world` items each"],
     ["torch.tensor_split(x, world)[rank]"]),
    ("fortysecond_bucketed_asr_train", "decided-on-the-root-from-its-own",
     ["`choice` is decided on rank 0 alone (`if rank == 0:`, bucketed_asr_train.py:68) from its own `batches`",
      "rank 1 applies it to its own `batches`"], ["all_reduce with MIN of each rank's counts"]),
    ("fortysecond_conformer_ctc_train", "sized-by-own-longest",
     ["(conformer_ctc_train.py:44) is sized by this rank's own longest item (`sub_len.max()`)",
      "`dist.all_reduce(local_max, op=dist.ReduceOp.MAX)`, line 75"], ["torch.arange(x.shape[1])"]),
    ("fortysecond_packed_lstm_ctc_train", "padded-from-the-front-of-an-order",
     ["topped up with items from the start of `order`", "`mine += order[:per_rank - len(mine)]`"],
     ["sort it by length", "enforce_sorted=False"]),
    ("fortysecond_learnable_frontend_train", "changed-in-place-for-backward",
     ["the all_reduce at learnable_frontend_train.py:31", "the output of Sqrt"], ["give the all_reduce a copy"]),
    ("fortysecond_robust_fedavg_trimmed", "empty-at-this-world-size",
     ["`ordered[k:n - k]` (robust_fedavg_trimmed.py:41, in trimmed_mean()) is empty at this run's world size of 2",
      "its bounds come to 1 and 1 there"], ["k = min(k, (n - 1) // 2)"]),
    ("fortysecond_secure_agg_fedavg", "pairs-of-an-absent-rank",
     ["`masked` (secure_agg_fedavg.py:78) gets a term per peer that the peer cancels with the opposite sign",
      "only under `if available(r, rank):`"], ["add pair terms only between ranks that take part"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortysecond_fedavg_local_adam", "state = opt.state[p]", "state = ledger[p]", "optimizer-state-not-made"),
    ("fortysecond_refresh_ivf_centroids", "torch.from_numpy(shard), torch.from_numpy(centroids)",
     "torch.tensor(shard), torch.tensor(centroids)", "collective-into-read-only"),
    ("fortysecond_shard_rerank_eval", "exact_reference(queries, shard) if rank == 0 else None",
     "exact_reference(queries, shard)", "default-dtype-per-rank"),
    ("fortysecond_knn_recall_eval", "dist = torch.cdist(queries, block)", "dists = torch.cdist(queries, block)",
     "module-name-rebound"),
    ("fortysecond_build_embedding_index", "torch.split(tokens, world)[rank], torch.split(ids, world)[rank]",
     "torch.tensor_split(tokens, world)[rank], torch.tensor_split(ids, world)[rank]", "split-size-is-the-world"),
    ("fortysecond_bucketed_asr_train", "        if rank == 0:\n            ready",
     "        if True:\n            ready", "decided-on-the-root-from-its-own"),
    ("fortysecond_conformer_ctc_train", "op=dist.ReduceOp.MAX", "op=dist.ReduceOp.SUM", "sized-by-own-longest"),
    ("fortysecond_packed_lstm_ctc_train", "mine += order[: per_rank - len(mine)]",
     "mine += order[len(order) - (per_rank - len(mine)):]", "padded-from-the-front-of-an-order"),
    ("fortysecond_robust_fedavg_trimmed", "k = max(1, int(math.floor(ratio * n)))",
     "k = min(int(math.floor(ratio * n)), (n - 1) // 2)", "empty-at-this-world-size"),
    ("fortysecond_secure_agg_fedavg", "masked = (masked + m) % MOD if rank < j else (masked - m) % MOD",
     "masked = (masked + m) % MOD", "pairs-of-an-absent-rank"),
]


def test_subgroup_keys_waited_for_after_every_rank_joined_are_no_rank_claimed_twice():
    """Every rank went on past init_process_group, then waited in new_group for another group's keys: the world's
    rendezvous was complete, so "two processes claim one rank" (and its LOCAL_RANK fix) cannot be the cause."""
    assert "duplicate-rank" not in causes(sample("fortysecond_fedavg_round_cohorts"))


def test_a_share_rounded_up_that_places_no_window_is_not_told_as_running_past_the_end():
    """ceil(n / world) used to pad a share up to the others' count (no `rank * share` window): nothing runs past the
    data's end, and clipping a window that is not there cannot help."""
    assert diagnose(sample("fortysecond_packed_lstm_ctc_train"))[0].cause != "share-rounded-up"
    assert "share-rounded-up" not in causes(sample("fortysecond_packed_lstm_ctc_train"))
