"""The thirteenth held-out batch's misses (bench/diagnosis/THIRTEENTH_BATCH_A.md, _B.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where the finding must not
fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_eleventh import without_lines
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirteenth_fp16_adam_regressor", "weights-in-low-precision",
     ["`model = ... .half()`", "Adam (line 38)", "eps of 1e-8, which is 0 in float16", "nan"],
     ["weights in float32", "GradScaler", "eps=1e-4"]),
    ("thirteenth_fsdp2_optimizer_first", "optimizer-before-model-change",
     ["fsdp2_optimizer_first.py:45 (in build, called at line 54)", "before fully_shard"],
     ["build the optimizer after sharding"]),
    ("thirteenth_jsonl_manifest_len", "dataset-length-mismatch",
     ["IntentDataset.__len__ returns `self.manifest['num_records']`", "not len(self.records)"],
     ["return len(self.records) from __len__"]),
    ("thirteenth_dcp_eval_reload", "checkpoint-loaded-into-empty",
     ["`dcp.load(state, checkpoint_id=CKPT)`", "empty dict (line 63)"], ["state = {'model': model.state_dict()}"]),
    ("thirteenth_feature_stats_npy", "waits-on-a-file",
     ["waiting for STATS", "`np.save(STATS, stats)` (line 45) wrote STATS + '.npy'"], ["ends in .npy"]),
    ("thirteenth_pca_init_broadcast", "tensor-not-contiguous",
     ["broadcast at pca_init_broadcast.py:45 in sync_initial_weights", "strided view"], ["contiguous()"]),
    ("thirteenth_pipeline_send_buffer", "buffer-reused-before-sent",
     ["`dist.isend(staging, dst=1, tag=mb)`", "`staging.copy_(enc(inputs[mb]))`, line 36"],
     ["staging.clone()", "wait()"]),
    ("thirteenth_eval_after_cleanup", "group-made-again",
     ["again (eval_after_cleanup.py:15 in setup_distributed) after destroy_process_group"],
     ["once per process", "dist.new_group()"]),
    ("thirteenth_dist_url_flag", "master-unreachable",
     ["init_method (tcp://node0:23456)", "rank 0 too joins as a client"], ["init_method='env://'"]),
]


def test_float16_weights_without_a_nan_or_with_an_eps_float16_holds_are_not_told_a_vanishing_eps():
    evidence = sample("thirteenth_fp16_adam_regressor")
    held = with_source(evidence, "lr=3e-4, weight_decay=0.0)", "lr=3e-4, weight_decay=0.0, eps=1e-4)")
    assert "eps of 1e-8" not in diagnose(held)[0].title


def test_an_optimizer_built_after_sharding_is_not_before_it():
    evidence = sample("thirteenth_fsdp2_optimizer_first")
    after = with_source(evidence, "    fully_shard(model)\n", "    fully_shard(model)\n    optimizer = torch.optim.AdamW("
                        "model.parameters(), lr=3e-3)\n")
    assert "optimizer-before-model-change" not in causes(after)


def test_a_length_of_the_list_indexed_and_a_load_into_a_filled_dict_are_not_these_causes():
    manifest = with_source(sample("thirteenth_jsonl_manifest_len"), "return self.manifest[\"num_records\"]",
                           "return len(self.records)")
    assert "dataset-length-mismatch" not in causes(manifest)
    filled = with_source(sample("thirteenth_dcp_eval_reload"), "    state = {}\n",
                         "    state = {\"model\": restored.state_dict()}\n")
    assert "checkpoint-loaded-into-empty" not in causes(filled)


def test_a_name_saved_with_its_suffix_is_waited_for_as_a_file_left_on_a_node():
    evidence = sample("thirteenth_feature_stats_npy")
    suffixed = with_source(evidence, 'os.path.join("artifacts", "feature_stats")',
                           'os.path.join("artifacts", "feature_stats.npy")')
    top = diagnose(suffixed)[0]
    assert top.cause == "waits-on-a-file" and ".npy" not in top.title


def test_a_send_waited_in_the_loop_and_a_group_made_once_are_not_these_causes():
    waited = with_source(sample("thirteenth_pipeline_send_buffer"), "pending.append(dist.isend(staging, dst=1, tag=mb))",
                         "dist.isend(staging, dst=1, tag=mb).wait()")
    assert "buffer-reused-before-sent" not in causes(waited)
    evidence = sample("thirteenth_eval_after_cleanup")
    once = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, recent=tuple(
        call for call in trace.calls.recent if call.op != "destroy_process_group"))) if trace.calls else trace
        for trace in evidence.traces])
    assert "group-made-again" not in causes(once)


def test_a_tcp_init_method_outside_torchrun_keeps_the_port_finding():
    evidence = without_lines(sample("thirteenth_dist_url_flag"), "elastic")
    evidence = without_lines(evidence, "ChildFailedError")
    top = diagnose(evidence)[0]
    assert top.cause == "master-unreachable" and "torchrun" not in top.title
