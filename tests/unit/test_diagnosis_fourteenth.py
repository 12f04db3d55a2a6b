"""The fourteenth held-out batch's misses (bench/diagnosis/FOURTEENTH_BATCH_A.md, _B.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where the finding must not
fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fourteenth_time_budget_stop", "collective-under-own-condition",
     ["rank 0 left the loop (line 38) at `if time.monotonic() > deadline: break` (line 46)",
      "rank 1 is still in it"], ["decide `time.monotonic() > deadline` together", "op=MAX"]),
    ("fourteenth_best_ckpt_local_val", "collective-under-own-condition",
     ["gather_object at line 59", "line 59 runs only where `val_loss < best` holds (line 57)"],
     ["decide `val_loss < best` together", "broadcast the decision"]),
    ("fourteenth_dtensor_vocab_shards", "sharded-without-shape",
     ["`DTensor.from_local(local_table.detach(), mesh, [Shard(0)])` (dtensor_vocab_shards.py:41)", "without shape="],
     ["shape=full_shape", "stride=full_stride"]),
    ("fourteenth_monitor_spawn_export", "child-signal-ignored",
     ["`signal.signal(signal.SIGCHLD, signal.SIG_IGN)` (monitor_spawn_export.py:30)", "no exit status"],
     ["do not ignore SIGCHLD", "SIG_DFL"]),
    ("fourteenth_pipeline_last_batch", "pipeline-last-batch-smaller",
     ["micro-batches of 2 rows where it was built for 8", "DataLoader at pipeline_last_batch.py:31"],
     ["drop_last=True"]),
    ("fourteenth_async_checkpoint_default_group", "collectives-from-threads",
     ["AsyncCheckpointExecutor_0 (gather_object)", "async_checkpoint_default_group.py:36"],
     ["dist.new_group(backend='gloo')", "process_group=ckpt_group"]),
    ("fourteenth_amp_half_model_scaler", "half-weights-with-scaler",
     ["`model = model.half()`, amp_half_model_scaler.py:30"], ["float32", "torch.autocast"]),
    ("fourteenth_dcp_eval_fresh_model", "checkpoint-keys-differ",
     ["'encoder.0.bias'", "saved from `{'model': model_sd", "loaded into `weights` (dcp_eval_fresh_model.py:75)"],
     ["state = {'model': fresh.state_dict()}"]),
    ("fourteenth_worker_seed_numpy", "worker-init-failed",
     ["in seed_worker, the DataLoader's worker_init_fn", "64-bit"], ["fix seed_worker", "% 2**32"]),
    ("fourteenth_accum_scheduler_microstep", "scheduler-per-micro-batch",
     ["`scheduler.step()` (accum_scheduler_microstep.py:61)", "`optimizer.step()` (line 55) only where `last_micro`"],
     ["move scheduler.step() into the `if last_micro:` block"]),
]


def with_log(evidence, old: str, new: str):
    """The record with `old` replaced by `new` in every node's log (which must hold it)."""
    assert any(old in line for node in evidence.nodes for line in node.lines), old
    return replace(evidence, nodes=[replace(node, lines=[line.replace(old, new) for line in node.lines])
                                    for node in evidence.nodes])


def test_a_condition_the_ranks_agreed_on_or_one_on_the_rank_is_not_the_ranks_own_values():
    evidence = sample("fourteenth_best_ckpt_local_val")
    agreed = with_source(evidence, "        if val_loss < best:\n",
                         "        dist.all_reduce(val_loss)\n        if val_loss < best:\n")
    assert "collective-under-own-condition" not in causes(agreed)
    on_the_rank = with_source(evidence, "        if val_loss < best:\n", "        if rank == 1:\n")
    assert "collective-under-own-condition" not in causes(on_the_rank)


def test_an_even_or_shaped_dtensor_a_reset_child_signal_and_full_batches_are_not_these_causes():
    shaped = with_source(sample("fourteenth_dtensor_vocab_shards"), "mesh, [Shard(0)])",
                         "mesh, [Shard(0)], shape=(VOCAB, DIM), stride=(DIM, 1))")
    assert "sharded-without-shape" not in causes(shaped)
    reset = with_source(sample("fourteenth_monitor_spawn_export"), "signal.SIG_IGN)", "signal.SIG_DFL)")
    assert "child-signal-ignored" not in causes(reset)
    full = with_source(sample("fourteenth_pipeline_last_batch"), "shuffle=False)", "shuffle=False, drop_last=True)")
    assert "pipeline-last-batch-smaller" not in causes(full)


def test_an_async_save_on_a_group_of_its_own_is_not_named_and_a_rooted_scatter_is_not_out_of_step():
    own_group = with_source(sample("fourteenth_async_checkpoint_default_group"), "dcp.async_save(state, ",
                            "dcp.async_save(state, process_group=ckpt_group, ")
    assert "async_save" not in diagnose(own_group)[0].title
    # dcp's load scatters from rank 0 only: the other ranks' recorder holds the scatter without its list
    assert "collective-mismatch" not in causes(sample("fourteenth_dcp_eval_fresh_model"))


def test_a_worker_that_failed_on_a_sample_is_not_told_its_start_up_hook():
    evidence = with_log(sample("fourteenth_worker_seed_numpy"), "init_fn(worker_id)", "data = fetcher.fetch(index)")
    assert diagnose(evidence)[0].cause != "worker-init-failed"


def test_a_scheduler_stepped_with_the_optimizer_or_once_an_epoch_is_not_ahead_of_it():
    evidence = sample("fourteenth_accum_scheduler_microstep")
    with_update = with_source(evidence, "                optimizer.zero_grad()\n",
                              "                optimizer.zero_grad()\n                scheduler.step()\n")
    with_update = with_source(with_update, "                    loss.backward()\n            scheduler.step()\n",
                              "                    loss.backward()\n")
    assert "scheduler-per-micro-batch" not in causes(with_update)
    per_epoch = with_source(evidence, "                    loss.backward()\n            scheduler.step()\n",
                            "                    loss.backward()\n        scheduler.step()\n")
    assert "scheduler-per-micro-batch" not in causes(per_epoch)


def test_a_branch_on_a_loop_counter_or_a_constant_is_not_the_ranks_own_values():
    evidence = sample("fourteenth_best_ckpt_local_val")
    for test in ("epoch % 3 == 0", "epoch == EPOCHS - 1"):
        counted = with_source(evidence, "        if val_loss < best:\n", f"        if {test}:\n")
        assert "collective-under-own-condition" not in causes(counted), test


def test_a_crash_the_rank_was_warned_of_starts_the_fix_from_the_warning_but_not_from_an_api_change():
    evidence = sample("fourteenth_pipeline_last_batch")
    crashed = next(finding for finding in diagnose(evidence) if finding.cause == "rank-crashed")
    assert "warned of first: \"Using a target size (torch.Size([2, 1]))" in crashed.fix and "schedules.py:587" in crashed.fix
    future = with_log(evidence, "UserWarning: Using a target size", "FutureWarning: Using a target size")
    crashed = next(finding for finding in diagnose(future) if finding.cause == "rank-crashed")
    assert "warned of first" not in crashed.fix


def test_a_while_loop_on_each_ranks_own_clock_is_told_like_its_break():
    evidence = with_source(sample("fourteenth_time_budget_stop"), "    while True:\n",
                           "    while time.monotonic() <= deadline:\n")
    evidence = with_source(evidence, "        if time.monotonic() > deadline:\n            break\n", "")
    top = diagnose(evidence)[0]
    assert top.cause == "collective-under-own-condition" and "`while time.monotonic() <= deadline`" in top.title


def test_a_break_on_a_step_count_or_an_option_is_one_every_rank_takes_alike():
    evidence = sample("fourteenth_time_budget_stop")
    for test in ("step >= 500", "step >= args.max_steps"):
        counted = with_source(evidence, "        if time.monotonic() > deadline:\n", f"        if {test}:\n")
        assert "collective-under-own-condition" not in causes(counted), test


def test_ranks_that_ended_themselves_after_a_warning_start_the_fix_from_it():
    evidence = with_source(sample("fourteenth_accum_scheduler_microstep"), "            scheduler.step()\n",
                           "            sched.step()\n")  # no scheduler the code rule knows: the ending's finding
    top = diagnose(evidence)[0]
    assert top.cause == "rank-exited" and "warned of first: \"Detected call of `lr_scheduler.step()`" in top.fix
