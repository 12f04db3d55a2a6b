"""The twelfth held-out batch's misses (bench/diagnosis/TWELFTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_eleventh import without_lines
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twelfth_memmap_features_inplace", "fatal-signal",
     ["SIGSEGV", "memmap_features_inplace.py:38", "UserWarning it printed at memmap_features_inplace.py:35",
      "not writable"], ["copy the array", "make it writable"]),
    ("twelfth_mmap_stats_all_reduce", "fatal-signal",
     ["called from main (mmap_stats_all_reduce.py:31)", "not writable"], ["copy the array"]),
    ("twelfth_skip_corrupt_records", "sample-is-none", ["None", "__getitem__ returns None at skip_corrupt_records.py:46"],
     ["s is not None", "before the DistributedSampler"]),
    ("twelfth_nnodes_launch_line", "nodes-never-come", ["--nnodes 3", "2 nodes", "no worker started"],
     ["--nnodes 2", "lab up --nodes 3"]),
    ("twelfth_fork_pool_cache_lock", "lock-copied-by-fork",
     ["child processes (2 of them", "self.lock at fork_pool_cache_lock.py:32", "fork copies every lock"],
     ["before starting threads", "get_context('spawn')"]),
    ("twelfth_store_config_check", "store-value-compared-with-str",
     ["`published != digest`", "published (from side.get('config_sha'), line 32) comes from a store's get()"], ["digest.encode()", ".decode()"]),
    ("twelfth_loader_start_method", "start-method-set-twice",
     ["set a second time", "loader_start_method.py:29 in make_loader, which the job calls at lines 41, 51"],
     ["once", "get_context('spawn')", "multiprocessing_context="]),
    ("twelfth_eval_inference_mode_gather", "inference-tensor-updated",
     ["torch.inference_mode()", "in validate", "eval_inference_mode_gather.py:47"], ["outside inference mode",
                                                                                   "torch.no_grad()", ".clone()"]),
    ("twelfth_reduce_total_samples", "reduce-read-off-root",
     ["`dist.reduce(total, dst=0)`", "every rank then uses total (line 27)"], ["dist.all_reduce(total)"]),
    ("twelfth_contrastive_gather_check", "gathered-without-gradient",
     ["`dist.all_gather(parts, k)`", "no autograd history", "torch.cat(parts), line 31"],
     ["torch.distributed.nn.functional.all_gather(k)"]),
    ("twelfth_fsdp_resume_pretrained", "plain-tensor-into-dtensor", ["load_state_dict", "DTensors", "fully_shard"],
     ["set_model_state_dict", "full_state_dict=True", "before fully_shard()"]),
    ("twelfth_global_feature_stats", "variance-by-cancellation",
     ["`(total_sq / count - mean * mean).sqrt()`", "global_feature_stats.py:35", "nan"],
     ["(x - mean)**2", "float64", "clamp(min=0)"]),
    ("twelfth_bf16_finetune_stalls", "weights-in-low-precision",
     ["`model = model.to(torch.bfloat16)`", "bf16_finetune_stalls.py:37", "AdamW (line 39)"],
     ["weights in float32", "torch.autocast(device_type, dtype=torch.bfloat16)"]),
    ("twelfth_best_checkpoint_test", "weights-only-forced",
     ["passes weights_only=False", "on node1 loaded weights-only", "TORCH_FORCE_WEIGHTS_ONLY_LOAD is set on node1"],
     ["unset TORCH_FORCE_WEIGHTS_ONLY_LOAD on node1"]),
    ("twelfth_causal_mask_cache_ddp", "buffer-resized",
     ["buffer causal_mask (registered at causal_mask_cache_ddp.py:51)", "assigned anew in mask_for (line 56)"],
     ["plain attribute", "broadcast_buffers=False"]),
    ("twelfth_fsdp_checkpoint_rank0", "collective-mismatch",
     ["rank 0 gathered the sharded model's full state dict", "get_model_state_dict at fsdp_checkpoint_rank0.py:29"],
     ["on all ranks", "cpu_offload=True", "torch.save under `if rank == 0`"]),
]


def test_a_native_crash_without_a_warning_before_it_keeps_the_general_fix():
    quiet = without_lines(sample("twelfth_memmap_features_inplace"), "UserWarning")
    top = diagnose(quiet)[0]
    assert top.cause == "fatal-signal" and "warning" not in top.fix and "Warning" not in top.title


def test_a_crash_in_a_thread_python_does_not_run_is_placed_in_the_main_thread_not_the_lab_watcher():
    top = diagnose(without_lines(sample("twelfth_mmap_stats_all_reduce"), "UserWarning"))[0]
    assert "mmap_stats_all_reduce.py:31" in top.title and "sitecustomize" not in top.title


def test_a_collate_error_of_shapes_is_not_a_sample_that_is_none():
    evidence = sample("twelfth_skip_corrupt_records")
    shapes = without_lines(evidence, "NoneType")
    assert "sample-is-none" not in causes(shapes)
    # no `return None` in __getitem__: still a None sample (the message says so), without a line to point at
    elsewhere = with_source(evidence, "return None", "return self.fallback")
    top = diagnose(elsewhere)[0]
    assert top.cause == "sample-is-none" and "returns None at" not in top.title


def test_agents_told_as_many_nodes_as_were_launched_are_not_waiting_for_more():
    evidence = sample("twelfth_nnodes_launch_line")
    told_two = replace(evidence, processes=[replace(process, cmdline=[
        "2" if word == "3" else word for word in process.cmdline]) for process in evidence.processes])
    assert "nodes-never-come" not in causes(told_two)


def test_a_pool_worker_stopped_elsewhere_than_at_a_lock_is_not_a_lock_copied_by_fork():
    evidence = sample("twelfth_fork_pool_cache_lock")
    no_lock = with_source(evidence, "    def get(self, doc_id):\n        with self.lock:",
                          "    def get(self, doc_id):\n        if doc_id >= 0:")
    assert "lock-copied-by-fork" not in causes(no_lock)


def test_a_store_value_decoded_before_it_is_compared_is_not_bytes_against_str():
    evidence = sample("twelfth_store_config_check")
    decoded = with_source(evidence, 'published = side.get("config_sha")', 'published = side.get("config_sha").decode()')
    assert "store-value-compared-with-str" not in causes(decoded)


def test_the_messages_of_start_methods_and_inference_tensors_are_what_tells_them():
    for name, cause, words in (("twelfth_loader_start_method", "start-method-set-twice", "context has already"),
                               ("twelfth_eval_inference_mode_gather", "inference-tensor-updated", "inference tensor")):
        assert cause not in causes(without_lines(sample(name), words))


def test_a_reduced_value_every_rank_does_not_read_leaves_the_mismatch_as_it_was():
    evidence = sample("twelfth_reduce_total_samples")
    unread = with_source(evidence, "int(total.item())", "int(len(x) * world)")
    assert diagnose(unread)[0].cause == "shape-mismatch"


def test_a_gather_for_metrics_or_through_the_differentiable_collective_is_not_without_gradient():
    evidence = sample("twelfth_contrastive_gather_check")
    differentiable = with_source(evidence, "import torch.distributed as dist",
                                 "import torch.distributed as dist\nimport torch.distributed.nn.functional")
    assert "gathered-without-gradient" not in causes(differentiable)
    for_metrics = with_source(evidence, "    parts[dist.get_rank()] = k\n", "    print(len(parts))\n")
    assert "gathered-without-gradient" not in causes(for_metrics)


def test_a_dtensor_message_a_sqrt_without_cancellation_and_float32_weights_are_not_these_causes():
    assert "plain-tensor-into-dtensor" not in causes(without_lines(sample("twelfth_fsdp_resume_pretrained"), "DTensor"))
    stats = sample("twelfth_global_feature_stats")
    assert "variance-by-cancellation" not in causes(without_lines(stats, "nan"))
    two_pass = with_source(stats, "(total_sq / count - mean * mean).sqrt()", "(total_sq / count).sqrt()")
    assert "variance-by-cancellation" not in causes(two_pass)
    stalls = sample("twelfth_bf16_finetune_stalls")
    autocast = with_source(stalls, "model = model.to(torch.bfloat16)", "model = model  # torch.autocast below")
    assert "weights-in-low-precision" not in causes(autocast)


def test_the_load_a_forced_weights_only_refusal_quotes_is_its_whole_line():
    evidence = sample("twelfth_best_checkpoint_test")
    noted = replace(evidence, nodes=[replace(node, lines=[
        line.replace("weights_only=False)", "weights_only=False)  # note: ours") for line in node.lines])
        for node in evidence.nodes])
    assert "`ckpt = torch.load(best_path" in diagnose(noted)[0].title


def test_a_weights_only_refusal_of_a_load_that_did_not_ask_otherwise_is_not_forced():
    plain = without_lines(sample("twelfth_best_checkpoint_test"), "weights_only=False")
    assert "weights-only-forced" not in causes(plain)


def test_a_buffer_set_only_in_init_leaves_the_size_mismatch_as_it_was():
    evidence = sample("twelfth_causal_mask_cache_ddp")
    kept = with_source(evidence, "            self.causal_mask = torch.ones(", "            grown = torch.ones(")
    assert "buffer-resized" not in causes(kept)


def test_ranks_out_of_step_without_a_state_dict_in_the_traceback_keep_the_general_finding():
    evidence = without_lines(sample("twelfth_fsdp_checkpoint_rank0"), "state_dict")
    top = diagnose(evidence)[0]
    assert top.cause == "collective-mismatch" and "state dict" not in top.title


def test_a_timeout_with_no_rank_in_a_distributed_call_says_where_each_was_not_to_shorten_a_timeout():
    busy = with_source(sample("twelfth_fork_pool_cache_lock"), "    def get(self, doc_id):\n        with self.lock:",
                       "    def get(self, doc_id):\n        if doc_id >= 0:")
    top = diagnose(busy)[0]
    assert top.cause == "timed-out" and "no rank was waiting for another" in top.fix
    assert "rank 0 in main (fork_pool_cache_lock.py:53)" in top.fix and "FeatureCache.get" in top.fix
    assert "init_process_group" not in top.fix
    evidence = sample("twelfth_nnodes_launch_line")
    unlaunched = replace(evidence, processes=[replace(process, cmdline=[
        "2" if word == "3" else word for word in process.cmdline]) for process in evidence.processes])
    top = diagnose(unlaunched)[0]
    assert top.cause == "timed-out" and "no worker process ever started" in top.fix and "--nnodes" in top.fix


def test_a_dataloader_worker_at_a_lock_copied_by_fork_is_told_as_the_stuck_worker_its_rank_waits_for():
    """The suite's own dataloader_worker_stuck.py run under torchrun: its worker waits at `with cache_lock:`, a lock
    forked while a thread held it; the finding names the worker and its rank (its fix says fork and locks)."""
    top = diagnose(sample("dataloader_worker_stuck_torchrun"))[0]
    assert (top.cause, top.node, top.rank) == ("dataloader-worker-stuck", 1, 1) and "fork" in top.fix
