"""The thirty-eighth held-out batch's mended misses (bench/diagnosis/THIRTYEIGHTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyeighth_distill_student_compressed_grads", "comm-hook-state-per-bucket",
     ["the DDP communication hook quantized_allreduce_hook (distill_student_compressed_grads.py:36",
      "keeps state per bucket (`bucket.index()`, line 38)", "DDP rebuilds its buckets after the first iteration"],
     ["start_powerSGD_iter", "drop a state whose shape differs"]),
    ("thirtyeighth_prune_channels_then_finetune", "size-from-rank-data",
     ["`prune_hidden(model, importance)` (prune_channels_then_finetune.py:49)",
      "`importance = channel_importance(model, rank)` (line 48)"], ["compute it once", "send it to every rank"]),
    ("thirtyeighth_hierarchical_local_sgd", "sized-for-another-world",
     ["`GPUS_PER_SERVER = 4` (hierarchical_local_sgd.py:12) is a size written for another cluster",
      "world size of 2 (2 nodes x 1 per node)"], ["LOCAL_WORLD_SIZE", "must divide the world size"]),
    ("thirtyeighth_pbt_width_search", "received-state-built-otherwise",
     ["rank 1 loaded a model's state that another rank sent it (broadcast_object_list at pbt_width_search.py:78)",
      "`model = make_model(cfg)` (line 62), from settings that follow from the rank (`cfg = member_config(rank)`"],
     ["rebuild this rank's model from them before load_state_dict"]),
    ("thirtyeighth_pbt_optimizer_exploit", "received-state-built-otherwise",
     ["rank 1 loaded an optimizer's state", "`opt = build_optimizer(model, hp)` (line 62)",
      "(`hp = member_hparams(rank)`, line 60)"], ["rebuild this rank's optimizer"]),
]

TOLD += [  # parts c and d, scored after the mends above
    ("thirtyeighth_convert_tp_lm_to_single", "padding-for-the-world-kept",
     ["embed.weight has 1008 rows where the model loading it has 1000",
      "(`(vocab + multiple - 1) // multiple`, convert_tp_lm_to_single.py:16)"], ["joined[:1000]"]),
    ("thirtyeighth_train_with_early_stopping", "decision-result-discarded",
     ["broadcast at train_with_early_stopping.py:74 in main sent a decision into a tensor made for the call",
      "each rank then decided on its own `stopper.should_stop`"],
     ["flag = torch.tensor(int(stopper.should_stop)); dist.broadcast(flag, src=0); if flag.item()"]),
    ("thirtyeighth_calibration_report", "size-from-rank-data",
     ["all_reduce at calibration_report.py:52", "a size `n_bins` that each rank counts in its own data",
      "`n_valid = int(valid.sum())` (line 47)"], ["give `n_bins` one value on every rank"]),
    ("thirtyeighth_export_sharded_weights", "file-removed-by-another-rank",  # run again after the hooks kept removals
     ["rank 0 could not open model-00001-of-00004.safetensors (at export_sharded_weights.py:44 in read_header)",
      "rank 2 had removed it (at export_sharded_weights.py:58 in prune_stale), which rank 0 wrote"],
     ["one process per folder", "the whole list of names"]),
    ("thirtyeighth_eval_classifier_report", "parts-joined-as-whole",
     ["merged from every rank's gathered parts by their 'worker'", "(`socket.gethostname()`, line 66)",
      "the ranks of one node share it"], ["key the parts by the global rank"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    # a hook keyed by something that does not move with the rebuild is not this
    ("thirtyeighth_distill_student_compressed_grads", "idx = bucket.index()", "idx = 0",
     "comm-hook-state-per-bucket"),
    # the group size taken from the launch: no constant to blame
    ("thirtyeighth_hierarchical_local_sgd", "(LOCAL_PERIOD, GPUS_PER_SERVER)",
     "(LOCAL_PERIOD, int(os.environ['LOCAL_WORLD_SIZE']))", "sized-for-another-world"),
    # state read from a file, not received from another rank
    # the decision read from the tensor that received it
    ("thirtyeighth_train_with_early_stopping", "dist.broadcast(torch.tensor(int(stopper.should_stop)), src=0)\n"
     "        if stopper.should_stop:", "flag = torch.tensor(int(stopper.should_stop))\n        dist.broadcast(flag, "
     "src=0)\n        if flag.item():", "decision-result-discarded"),
    # a size every rank agrees on
    ("thirtyeighth_calibration_report", "n_bins = max(10, int(math.sqrt(n_valid)))", "n_bins = 15",
     "size-from-rank-data"),
    # parts keyed by the rank
    ("thirtyeighth_eval_classifier_report", "socket.gethostname()", "dist.get_rank()", "parts-joined-as-whole"),
    ("thirtyeighth_pbt_width_search", "model.load_state_dict(donor[\"model\"])",
     "model.load_state_dict(torch.load(\"donor.pt\"))", "received-state-built-otherwise"),
]


def test_a_size_chosen_on_the_rank_is_not_told_as_computed_from_its_data():
    """`importance` picked by the rank directly (a constant per rank) is a choice, which the other rules tell; one
    computed by the job's own function from what the rank read is data."""
    chosen = with_source(sample("thirtyeighth_prune_channels_then_finetune"),
                         "importance = channel_importance(model, rank)",
                         "importance = torch.ones(128) if rank == 0 else torch.rand(128)")
    assert "size-from-rank-data" not in causes(chosen)


def test_a_job_that_pads_nothing_for_the_world_is_not_told_its_padding_was_kept():
    """The same refused load, in a job with no size rounded up to the world size: not this cause."""
    unpadded = with_source(sample("thirtyeighth_convert_tp_lm_to_single"),
                           "return ((vocab + multiple - 1) // multiple) * multiple", "return vocab")
    assert "padding-for-the-world-kept" not in causes(unpadded)


def test_hostnames_as_keys_are_only_a_collision_where_ranks_share_a_node():
    one_per_node = sample("thirtyeighth_eval_classifier_report")
    assert "gethostname" not in diagnose(replace(one_per_node, nproc_per_node=1))[0].title


def test_a_missing_file_nobody_removed_is_not_told_as_removed():
    evidence = sample("thirtyeighth_export_sharded_weights")
    kept = replace(evidence, traces=[replace(trace, calls=replace(trace.calls, removed=())) if trace.calls else trace
                                     for trace in evidence.traces])
    assert "file-removed-by-another-rank" not in causes(kept)
