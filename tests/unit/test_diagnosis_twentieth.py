"""The twentieth held-out batch's misses (bench/diagnosis/TWENTIETH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose

from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentieth_lm_finetune_accum", "static-graph-changed",
     ["static_graph=True (lm_finetune_accum.py:49)", "no_sync() (lm_finetune_accum.py:65)"],
     ["drop static_graph=True where gradients are accumulated with no_sync()"]),
    ("twentieth_fsdp_intent_classifier", "plain-tensor-into-dtensor",
     ["fully_shard is applied to each of `model.blocks` (fsdp_intent_classifier.py:54) but never to the model itself"],
     ["fully_shard(model) after the submodules"]),
    ("twentieth_local_sgd_sensor_model", "cast-into-integer-tensor",
     ["local_sgd_sensor_model.py:39 puts a Float result into a Long tensor", "`model.state_dict().values()` (line 37)",
      "num_batches_tracked"], ["t.is_floating_point()", "model.parameters()"]),
    ("twentieth_churn_early_stopping", "state-dict-mismatch", ["every key starts with 'module.'"],
     ["model.module.state_dict()", "consume_prefix_in_state_dict_if_present"]),
    ("twentieth_speech_encoder_warmup", "grad-of-unused-parameter",
     ["read param.grad at speech_encoder_warmup.py:38", "the loop over `model.parameters()` (line 37)",
      "did not use"], ["if param.grad is None: continue", "find_unused_parameters=True"]),
    ("twentieth_train_pinned_cpus", "node-resource-from-global-value",
     ["ranks 2, 3 (on node1 only) failed with OSError", "`os.sched_setaffinity(0, cores)`", "given the global rank"],
     ["LOCAL_RANK"]),
    ("twentieth_train_with_metrics_exporter", "node-resource-from-global-value",
     ["[Errno 99] Cannot assign requested address", "given MASTER_ADDR", "`host = os.environ.get('MASTER_ADDR'"],
     ["'0.0.0.0'", "socket.gethostname()"]),
    ("twentieth_eval_work_queue", "authkey-differs", ["different authkeys"], ["authkey=KEY"]),
    ("twentieth_shard_planner_service", "event-loop-blocked",
     ["asyncio event loop", "stuck inside handle_register at shard_planner_service.py:36 (`time.sleep(0.05)`)"],
     ["await asyncio.sleep", "asyncio.to_thread"]),
    ("twentieth_train_shm_feature_cache", "shared-memory-of-another-node",
     ["ranks 2, 3 (on node1) could not attach to the shared-memory segment /featcache_none"],
     ["local rank 0 creates it"]),
]


def test_a_static_graph_without_no_sync_keeps_the_changed_parameters_wording():
    evidence = with_source(sample("twentieth_lm_finetune_accum"), "with model.no_sync():", "if True:")
    assert "static-graph-changed" in causes(evidence)
    assert "no_sync" not in next(f for f in diagnose(evidence) if f.cause == "static-graph-changed").title


def test_the_assert_without_a_static_graph_in_the_code_is_not_this_cause():
    evidence = with_source(sample("twentieth_lm_finetune_accum"), "DDP(TinyLM(), static_graph=True)", "DDP(TinyLM())")
    assert "static-graph-changed" not in causes(evidence)


def test_a_root_sharded_after_its_blocks_is_not_left_plain():
    evidence = with_source(sample("twentieth_fsdp_intent_classifier"), "        fully_shard(block)\n",
                           "        fully_shard(block)\n    fully_shard(model)\n")
    assert "never to the model itself" not in " ".join(f.title for f in diagnose(evidence))


def test_averaging_the_parameters_only_reaches_no_integer_buffer():
    evidence = with_source(sample("twentieth_local_sgd_sensor_model"),
                           "    for tensor in model.state_dict().values():\n        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)",
                           "    for tensor in model.parameters():\n        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)")
    top = diagnose(evidence)[0]
    assert top.cause == "cast-into-integer-tensor" and "num_batches_tracked" not in top.title


def test_a_grad_read_outside_a_loop_over_parameters_is_not_an_unused_parameter():
    evidence = with_source(sample("twentieth_speech_encoder_warmup"), "for param in model.parameters():",
                           "for param in [model.encoder.weight]:")
    assert "grad-of-unused-parameter" not in causes(evidence)


def test_a_per_node_resource_from_the_local_rank_is_not_this_cause():
    evidence = with_source(sample("twentieth_train_pinned_cpus"), 'rank = int(os.environ["RANK"])',
                           'local = int(os.environ["LOCAL_RANK"])')
    evidence = with_source(evidence, "set(range(rank * per_rank, (rank + 1) * per_rank))",
                           "set(range(local * per_rank, (local + 1) * per_rank))")
    assert "node-resource-from-global-value" not in causes(evidence)


def test_a_server_on_every_address_is_not_bound_to_the_master():
    evidence = with_source(sample("twentieth_train_with_metrics_exporter"), 'os.environ.get("MASTER_ADDR", "0.0.0.0")',
                           '"0.0.0.0"')
    assert "node-resource-from-global-value" not in causes(evidence)


def test_a_coroutine_that_awaits_leaves_no_loop_in_the_jobs_code():
    evidence = sample("twentieth_shard_planner_service")
    idle = replace(evidence, processes=[replace(process, threads=[replace(thread, frames=[
        frame for frame in thread.frames if "shard_planner_service" not in frame.file or frame.function != "handle_register"])
        for thread in process.threads]) for process in evidence.processes])
    assert "event-loop-blocked" not in causes(idle)
