"""The fifteenth held-out batch's misses (bench/diagnosis/FIFTEENTH_BATCH_A.md, _B.md): each scored run's own record
(the rerun's, for the rank whose output torchrun redirected), with the cause and fix the lab must now give first, and
the same record changed where the finding must not fire."""

from dataclasses import replace


from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_eleventh import without_lines
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fifteenth_scratch_tmpdir_loader", "socket-path-too-long",
     ["107 bytes", "120 characters"], ["TMPDIR=/tmp"]),
    ("fifteenth_quiet_ranks_flush", "stream-replaced-incompletely",
     ["`sys.stdout = _Quiet()` (quiet_ranks_flush.py:25)", "no flush()"], ["open(os.devnull, 'w')"]),
    ("fifteenth_latest_symlink_resume", "link-target-relative",
     ["`os.symlink(path, latest)` (latest_symlink_resume.py:30)", "read from the link's own folder"],
     ["os.path.basename(path)", "os.path.abspath(path)"]),
    ("fifteenth_progress_bar_width", "needs-a-terminal",
     ["`os.get_terminal_size()` (progress_bar_width.py:16)", "has none"],
     ["shutil.get_terminal_size(fallback=(80, 24))"]),
    ("fifteenth_run_name_login", "needs-a-terminal",
     ["`os.getlogin()` (run_name_login.py:18)"], ["getpass.getuser()"]),
    ("fifteenth_init_sync_rank_seed", "initial-weights-differ",
     ["rank 0 42, rank 1 43", "`DDP(model, init_sync=False)` (init_sync_rank_seed.py:42)"],
     ["drop init_sync=False"]),
    ("fifteenth_fsdp2_head_swap_clip", "plain-tensor-into-dtensor",
     ["`model.head = nn.Linear(64, 6)` (fsdp2_head_swap_clip.py:57)", "after fully_shard sharded it (line 54)"],
     ["replace the module, then fully_shard"]),
    ("fifteenth_unfreeze_backbone_after_ddp", "unfrozen-after-ddp",
     ["`p.requires_grad_(True)` (unfreeze_backbone_after_ddp.py:49)", "frozen (line 42)", "(line 43)"],
     ["wrap the model in DDP again after unfreezing"]),
    ("fifteenth_moe_empty_expert_fsdp2", "sharded-unit-skipped",
     ["each of `model.moe.experts` is a sharded unit", "`idx.numel() == 0` (line 41)"],
     ["call it on an empty batch", "shard the list together"]),
    ("fifteenth_layerdrop_checkpoint_random", "recomputation-took-another-path",
     ["`self.training and random.random() < self.p_drop`, layerdrop_checkpoint_random.py:27"],
     ["torch.rand(()) < p"]),
]


def test_a_short_tmpdir_a_real_stream_an_anchored_link_and_shutils_terminal_size_are_not_these_causes():
    assert "socket-path-too-long" not in causes(without_lines(sample("fifteenth_scratch_tmpdir_loader"), "AF_UNIX"))
    devnull = with_source(sample("fifteenth_quiet_ranks_flush"), "sys.stdout = _Quiet()",
                          "sys.stdout = open(os.devnull, 'w')")
    assert "stream-replaced-incompletely" not in causes(devnull)
    anchored = with_source(sample("fifteenth_latest_symlink_resume"), "os.symlink(path, latest)",
                           "os.symlink(os.path.basename(path), latest)")
    assert "link-target-relative" not in causes(anchored)
    falls_back = with_source(sample("fifteenth_progress_bar_width"), "os.get_terminal_size()",
                             "shutil.get_terminal_size()")
    assert "needs-a-terminal" not in causes(falls_back)


def test_a_rank_whose_output_was_redirected_is_read_from_its_last_words():
    """torchrun --redirects 3 sent every rank's traceback to a file: the logs hold none, the exit dumps do."""
    evidence = sample("fifteenth_run_name_login")
    assert not any("os.getlogin()" in line for node in evidence.nodes for line in node.lines)  # torchrun's own only
    assert any(trace.error and "os.getlogin()" in trace.error for trace in evidence.traces)


def test_ddp_with_its_first_broadcast_a_gather_after_training_and_a_head_swapped_before_sharding_are_not_these():
    synced = with_source(sample("fifteenth_init_sync_rank_seed"), "DDP(model, init_sync=False)", "DDP(model)")
    assert "initial-weights-differ" not in causes(synced)
    assert "gathered-without-gradient" not in causes(sample("fifteenth_init_sync_rank_seed"))  # a validation gather
    evidence = sample("fifteenth_fsdp2_head_swap_clip")
    before = with_source(evidence, "    model.head = nn.Linear(64, 6)\n", "    pass\n")
    assert "puts a new module" not in diagnose(before)[0].title


def test_a_model_wrapped_again_after_unfreezing_and_experts_run_on_every_rank_are_not_these_causes():
    rewrapped = with_source(sample("fifteenth_unfreeze_backbone_after_ddp"),
                            "                p.requires_grad_(True)\n",
                            "                p.requires_grad_(True)\n            ddp = DDP(model)\n")
    assert "unfrozen-after-ddp" not in causes(rewrapped)
    every_rank = with_source(sample("fifteenth_moe_empty_expert_fsdp2"), "if idx.numel() == 0:", "if False:")
    assert "sharded-unit-skipped" not in causes(every_rank)


def test_a_recomputation_that_draws_from_torch_names_no_other_generator():
    evidence = with_source(sample("fifteenth_layerdrop_checkpoint_random"), "random.random() < self.p_drop",
                           "torch.rand(()) < self.p_drop")
    top = diagnose(evidence)[0]
    assert top.cause == "recomputation-took-another-path" and "generator)" not in top.title


def test_a_missing_file_that_is_a_link_to_nothing_says_where_the_link_points():
    """The nodes asked after the run find the name as a symbolic link whose target does not exist (made by `ln -s` in
    a launch line as well as by the job's code): the finding says where a relative target really points."""
    evidence = with_source(sample("fifteenth_latest_symlink_resume"), "os.symlink(path, latest)",
                           "make_link(path, latest)")
    probes = evidence.probes
    linked = replace(probes, nodes=[replace(facts, paths={
        path: replace(answer, link="checkpoints/epoch_2.pt") if path.endswith("latest.pt") else answer
        for path, answer in facts.paths.items()}) for facts in probes.nodes])
    top = diagnose(replace(evidence, probes=linked))[0]
    assert top.cause == "file-missing-everywhere"
    assert "is a symbolic link to 'checkpoints/epoch_2.pt', which does not exist" in top.title
    assert top.title.endswith("checkpoints/checkpoints/epoch_2.pt") and "os.path.exists(link)" in top.fix
