"""The twenty-second held-out batch's mended misses (bench/diagnosis/TWENTYSECOND_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace


from lab.analysis.calls import Tensor
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample, with_calls
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentysecond_stream_pretokenized_shards", "empty-share-of-the-world",
     ["rank 3 got an empty or zero share", "`my_shards = SHARD_NAMES[rank::world]` (line 52)", "with 4 ranks"],
     ["as many shards as ranks or more"]),
    ("twentysecond_ema_classifier_finetune", "empty-share-of-the-world",
     ["`micro_batch = GLOBAL_BATCH // (world * GRAD_ACCUM)` (line 49)", "rounds down to 0"],
     ["derive the accumulation steps from the world size"]),
    ("twentysecond_rmse_forecaster_train", "changed-in-place-for-backward",
     ["the all_reduce at rmse_forecaster_train.py:64 wrote its result into a tensor (float32[scalar])",
      "the output of Sqrt"], ["give the all_reduce a copy", "call backward on loss"]),
    ("twentysecond_token_budget_schedule", "integer-sum-wrapped",
     ["the all_reduce of `counts` at token_budget_schedule.py:34 summed int32 values over 4 ranks",
      "wraps around to a negative number", "(token_budget_schedule.py:47)"], ["sum counts in int64"]),
    ("twentysecond_anomaly_threshold_calibrate", "input-over-size-limit",
     ["torch.quantile takes at most 16,777,216", "all_gather at anomaly_threshold_calibrate.py:57 gathered from 4 ranks",
      "4 x 4,500,000 = 18,000,000"], ["gather a random sample from each rank", "torch.kthvalue"]),
    ("twentysecond_eval_predictions_merge", "read-before-flushed",
     ["rank 0 read preds_rank1.jsonl at 97,817 bytes (eval_predictions_merge.py:79 in main)",
      "`self.fh = open(self.path, 'w')` (eval_predictions_merge.py:35)", "not flushed or closed before that read"],
     ["close it before the barrier"]),
    ("twentysecond_finetune_with_watchdog", "killed-by-signal",
     ["rank 1 was killed by SIGUSR1: the job's own code sends it (`os.kill(os.getpid(), signal.SIGUSR1)`, "
      "finetune_with_watchdog.py:33)", "installs its handler at finetune_with_watchdog.py:40"],
     ["install the SIGUSR1 handler in every process", "outside any rank condition"]),
    ("twentysecond_train_with_tracker", "env-not-set",
     ["RANK was not set in the job's processes", '`return int(os.environ.get("RANK", "0")) == 0` (train_with_tracker.py:15)',
      "made it 0 where the process group says 1"], ["dist.get_rank()", "--env RANK={rank}"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentysecond_stream_pretokenized_shards", "my_shards = SHARD_NAMES[rank::world]",
     "my_shards = SHARD_NAMES[3:]", "empty-share-of-the-world"),  # empty, but not by the world size
    ("twentysecond_ema_classifier_finetune", "micro_batch = GLOBAL_BATCH // (world * GRAD_ACCUM)",
     "micro_batch = GLOBAL_BATCH - 48", "empty-share-of-the-world"),  # 0, but not a share of the ranks
    ("twentysecond_token_budget_schedule", "total_steps = EPOCHS * total_tokens // tokens_per_step",
     "total_steps = EPOCHS * -3", "integer-sum-wrapped"),  # negative, but not from the sum
    ("twentysecond_eval_predictions_merge", 'print(f"rank {rank}: scored {len(ids)} examples", flush=True)',
     "writer.close()", "read-before-flushed"),  # closed before the barrier: whatever was short, not the buffer
]


def test_a_host_of_the_jobs_own_that_does_not_resolve_is_not_the_rendezvous():
    """Rank 0 retried a metrics push to a gateway no node resolves ("Name or service not known", no host named)
    after the ranks had met in collectives: the rendezvous host resolved, so that is not the cause (it was the top
    finding on the first try: "the rendezvous host 'the rendezvous host' does not resolve")."""
    assert "master-addr-unresolvable" not in causes(sample("twentysecond_train_metrics_push"))


def test_a_collective_on_another_tensor_is_not_named_as_what_changed_the_saved_one():
    """The same record with the all_reduce given a float32[1] (a detached copy, say): autograd's scalar was changed
    by something else, so the finding falls back to the code's in-place operations."""
    evidence = sample("twentysecond_rmse_forecaster_train")
    other = with_calls(evidence, recent=tuple(
        replace(call, tensors=(Tensor((1,), "float32"),)) if call.op == "all_reduce" else call
        for trace in evidence.traces[:1] for call in trace.calls.recent))
    top = diagnose(other)[0]
    assert top.cause == "changed-in-place-for-backward" and "all_reduce" not in top.title


def test_a_sum_in_int64_is_not_a_wrapped_sum():
    """The same record with the all_reduce given int64 counts: the negative total did not come from a wrap."""
    evidence = sample("twentysecond_token_budget_schedule")
    wide = with_calls(evidence, recent=tuple(
        replace(call, tensors=(Tensor((2,), "int64"),)) if call.op == "all_reduce" else call
        for call in evidence.traces[0].calls.recent))
    assert "integer-sum-wrapped" not in causes(wide)


def test_a_signal_the_job_does_not_send_is_still_told_as_someone_elses():
    """The same record with the watchdog's os.kill gone from the source: SIGUSR1 came from outside (a scheduler)."""
    other = with_source(sample("twentysecond_finetune_with_watchdog"), "os.kill(os.getpid(), signal.SIGUSR1)", "pass")
    top = diagnose(other)[0]
    assert top.cause == "killed-by-signal" and "a scheduler's warning" in top.title and "own code" not in top.title


def test_a_rank_variable_that_was_set_is_not_a_default_standing_in():
    """The same record where every process had RANK (as under torchrun): the default never stood in."""
    evidence = sample("twentysecond_train_with_tracker")
    told = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, env_read={
        **trace.calls.env_read, "RANK": str(trace.rank)})) if trace.calls else trace for trace in evidence.traces])
    assert "env-not-set" not in causes(told)
