"""The forty-first held-out batch's mended misses (bench/diagnosis/FORTYFIRST_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyfirst_embedding_eval_setup", "no-gpu-on-node",
     ["`CTX.local_rank = CTX.rank % num_devices` (embedding_eval_setup.py:28) divides by the number of GPUs",
      "which is 0 on node"], ["int(os.environ['LOCAL_RANK'])", "torch.cuda.is_available()"]),
    ("fortyfirst_feature_norm_trainer", "rank-zero-result-in-collective",
     ["`stats` (line 78) is the result of compute_feature_stats, decorated with @rank_zero_only",
      "the collective at feature_norm_trainer.py:79 was given that None"], ["compute stats on every rank"]),
    ("fortyfirst_classifier_trainer_quiet", "builtin-replaced-narrower",
     ["the job replaces print() on some ranks (`builtins.print = lambda *args: None`, classifier_trainer_quiet.py:26)",
      "the call at line 46 passes one it refuses"], ["def quiet(*args, **kwargs)", "logging"]),
    ("fortyfirst_regression_trainer_cached", "cached-before-init",
     ["get_world_size() (regression_trainer_cached.py:18) is cached (@functools.lru_cache(maxsize=None))"],
     ["get_world_size.cache_clear()", "initialize the process group before anything calls it"]),
    ("fortyfirst_kspace_coil_combine", "reduce-op-dtype",
     ["ReduceOp.MAX was asked of a complex tensor"], ["the magnitude (t.abs())"]),
    ("fortyfirst_dp_ddp_regression", "model-changed-per-rank",
     ["`if rank == 0:` (dp_ddp_regression.py:53)", "model.register_buffer('dp_sample_rate'",
      "broadcasts rank 0's parameters and buffers"], ["every rank builds, freezes and wraps the same model"]),
    ("fortyfirst_dp_poisson_classifier", "nothing-to-join",
     ["rank 1 had nothing to join", "`norms` is filled only by `.append`",
      "inside `for i in range(len(xb))`, which had nothing to go over there"], ["let a rank with no results"]),
    ("fortyfirst_class_balanced_patch_sampler", "share-over-global-total",
     ["`p = w / total.item()` (class_balanced_patch_sampler.py:40) divides this rank's own `w` by `total`",
      "all-reduced at line 39"], ["`w / w.sum()`", "all_gather"]),
    ("fortyfirst_stitch_denoised_volume", "slice-to-minus-zero",
     ["`block[lo:-hi]` (stitch_denoised_volume.py:57) ends at `-hi`", "`hi = min(HALO, depth - z1)`, line 42",
      "`[...:-0]` is `[...:0]`"], ["`block[lo:len(block) - hi]`"]),
    ("fortyfirst_dp_finetune_with_accountant", "rate-over-a-share",
     ["`sample_rate = EXPECTED_BATCH / len(x)` (dp_finetune_with_accountant.py:55)", "this rank's own share",
      "refuses it as out of range"], ["divide by the size of the whole data"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyfirst_regression_trainer_cached", "@functools.lru_cache(maxsize=None)\ndef get_world_size",
     "def get_world_size", "cached-before-init"),
    ("fortyfirst_classifier_trainer_quiet", "builtins.print = lambda *args: None",
     "builtins.print = lambda *args, **kwargs: None", "builtin-replaced-narrower"),
    ("fortyfirst_feature_norm_trainer", "@rank_zero_only\ndef compute_feature_stats",
     "def compute_feature_stats", "rank-zero-result-in-collective"),
    ("fortyfirst_dp_ddp_regression", "    if rank == 0:\n        attach_privacy_ledger(",
     "    if True:\n        attach_privacy_ledger(", "model-changed-per-rank"),
    ("fortyfirst_class_balanced_patch_sampler", "    dist.all_reduce(total)\n", "\n",
     "share-over-global-total"),
    ("fortyfirst_stitch_denoised_volume", "core = block[lo:-hi]", "core = block[lo:block.shape[0] - hi]",
     "slice-to-minus-zero"),
    ("fortyfirst_dp_finetune_with_accountant", "sample_rate = EXPECTED_BATCH / len(x)",
     "sample_rate = EXPECTED_BATCH / N_EXAMPLES", "rate-over-a-share"),
]


def test_a_gathered_list_reshaped_is_not_told_as_a_split_share():
    """`parts = [None] * world`, filled by all_gather_object, holds every rank's part: reshaping what it joins is no
    rank's share of a split (the view-of-a-split fix about heads was told here, and could not help)."""
    assert diagnose(sample("fortyfirst_stitch_denoised_volume"))[0].cause != "view-of-a-split"


def test_a_division_by_something_else_than_the_gpus_is_not_told_as_no_gpu():
    changed = with_source(sample("fortyfirst_embedding_eval_setup"), "num_devices = torch.cuda.device_count()",
                          "num_devices = int(os.environ.get('DEVICES', '0'))")
    assert "no-gpu-on-node" not in causes(changed)
