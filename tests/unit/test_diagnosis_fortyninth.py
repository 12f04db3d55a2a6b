"""The forty-ninth held-out batch's mended misses (bench/diagnosis/FORTYNINTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyninth_multiclip_action_trainer", "collective-mismatch",
     ["ran the DDP-wrapped model different numbers of times", "once per item of `for c in split_clips(video)`"],
     ["make the number of forward calls per step the same on every rank", "broadcast_buffers=False"]),
    ("fortyninth_temporal_segment_trainer", "scalar-stacked-with-a-vector",
     ["entry 2 ('smooth') is a tensor of shape [11], not a scalar", "returns early when `world < 2` (line 16)"],
     ["reduce 'smooth' with .mean()"]),
    ("fortyninth_clip_eval_sampler", "identity-of-a-received-copy",
     ["`preset == PRESETS['dense']` (clip_eval_sampler.py:42)", "SamplingPreset, defines no __eq__",
      "broadcast_object_list (line 64)"], ["compare by value"]),
    ("fortyninth_clip_feature_export", "shape-mismatch",
     ["`F.pad(feats, (0, missing))` (line 34) pads the last dimension"], ["F.pad(x, (0, 0, 0, n))"]),
    ("fortyninth_caption_scoring_pool", "identity-of-a-received-copy",
     ["`job is SHUTDOWN` (caption_scoring_pool.py:99) tests by identity", "recv_object_list (line 59)"],
     ["compare by value", "survives pickling"]),
    ("fortyninth_embedding_export_queue", "sends-left-unreceived",
     ["ranks 2, 3 were still sending to rank 0", "`while todo:` (embedding_export_queue.py:48)"],
     ["keep receiving until it is none"]),
    ("fortyninth_feature_cache_builder", "received-into-one-buffer",
     ["receives every message into the one tensor `row`", "`rows[range_id] = row`, line 44"], ["row.clone()"]),
    ("fortyninth_amp_sharded_trainer", "step-skipped-on-some-ranks",
     ["`scaler.step(opt)` (amp_sharded_trainer.py:96)", "ShardedAdamW.step makes a collective (all_gather, line 44)"],
     ["ShardedGradScaler"]),
    ("fortyninth_layer_owned_momentum_trainer", "scaler-step-without-gradients",
     ["rank 3 reached GradScaler.step with no gradient", "`p.grad = None` (layer_owned_momentum_trainer.py:32)"],
     ["give every rank something to own"]),
    ("fortyninth_clipped_owner_adam_trainer", "shape-mismatch",
     ["all_reduce at clipped_owner_adam_trainer.py:32 (rank 0 float32[3], rank 1 float32[2])",
      "keeps only where `p.grad is not None` (line 30)"], ["reduce one fixed-size value (a sum of squares)"]),
    ("fortyninth_ctr_zero_trainer", "nothing-in-this-share",
     ["rank 3 raised IndexError", "`local.param_groups[0]['params']` held no items"],
     ["no more ranks than the parameters or tasks shared out"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyninth_temporal_segment_trainer", "torch.stack([loss_dict[k].detach() for k in names], dim=0)",
     "torch.cat([loss_dict[k].detach().reshape(-1) for k in names])", "scalar-stacked-with-a-vector"),
    ("fortyninth_caption_scoring_pool", "if job is SHUTDOWN:", "if job.job_id < 0:", "identity-of-a-received-copy"),
    ("fortyninth_clip_eval_sampler", "class SamplingPreset:\n", "@dataclasses.dataclass\nclass SamplingPreset:\n",
     "identity-of-a-received-copy"),
    ("fortyninth_feature_cache_builder", "rows[range_id] = row", "rows[range_id] = row.clone()",
     "received-into-one-buffer"),
    ("fortyninth_amp_sharded_trainer", "torch.amp.GradScaler(", "ShardedGradScaler(", "step-skipped-on-some-ranks"),
]


def title_after(name: str, was: str, now: str) -> str:
    return diagnose(with_source(sample(name), was, now))[0].title


def test_a_forward_run_under_a_rank_test_is_not_told_as_a_loop_of_per_rank_length():
    assert "different numbers of times" not in title_after(
        "fortyninth_multiclip_action_trainer", "            clip_logits = [model(c.unsqueeze(0)) for c in split_clips(video)]",
        "            clip_logits = [model(c.unsqueeze(0)) for c in split_clips(video) if rank == 0]")


def test_a_pad_with_a_pair_for_each_dimension_is_not_told_as_padding_the_last():
    assert "pads the last dimension" not in title_after("fortyninth_clip_feature_export", "F.pad(feats, (0, missing))",
                                                        "F.pad(feats, (0, 0, 0, missing))")


def test_senders_that_were_not_left_waiting_are_not_told_as_unreceived():
    evidence = sample("fortyninth_embedding_export_queue")
    answered = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, failed=tuple(
        call for call in trace.calls.failed if call.op != "send"))) if trace.calls else trace
        for trace in evidence.traces])
    assert "sends-left-unreceived" not in causes(answered)


def test_the_same_call_with_sizes_from_a_list_kept_whole_is_not_told_as_filtered():
    assert "keeps only where" not in title_after("fortyninth_clipped_owner_adam_trainer",
                                                 "[p.grad for p in params if p.grad is not None]",
                                                 "[p.grad for p in params]")


def test_a_scaler_step_without_gradients_names_no_ownership_where_the_job_drops_no_gradient():
    title = title_after("fortyninth_layer_owned_momentum_trainer", "p.grad = None", "p.grad.zero_()")
    assert "reached GradScaler.step with no gradient" in title and "owns nothing" not in title
