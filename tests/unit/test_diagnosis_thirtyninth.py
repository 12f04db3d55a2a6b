"""The thirty-ninth held-out batch's mended misses (bench/diagnosis/THIRTYNINTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyninth_packed_lm_trainer", "env-set-by-the-job",
     ["the job sets PACK_LEN itself (`os.environ['PACK_LEN'] = str(pack_len)`, packed_lm_trainer.py:51)",
      "a process's environment is its own"], ["dist.broadcast_object_list(value, src=0)", "c10d store"]),
    ("thirtyninth_pretrain_finetune_job", "comm-hook-registered-twice",
     ["second communication hook (pretrain_finetune_job.py:40, pretrain_finetune_job.py:45)"],
     ["wrap the module again"]),
    ("thirtyninth_distill_phase_job", "ddp-wrapper-passed-on",
     ["`copy.deepcopy(teacher)` (distill_phase_job.py:37) was given the DistributedDataParallel wrapper"],
     ["copy.deepcopy(teacher.module)"]),
    ("thirtyninth_train_then_eval_phase", "group-non-member",
     ["rank 1 is not in the group `group`", "`dist.get_world_size(group)` (train_then_eval_phase.py:34) returns -1"],
     ["if dist.get_rank(group) >= 0:"]),
    ("thirtyninth_staged_growth_trainer", "sized-by-world-not-group",
     ["`dist.all_gather_into_tensor(gathered, local, group=group)` (staged_growth_trainer.py:27)",
      "sized by `dist.get_world_size()` (line 25)"], ["dist.get_world_size(group=group)"]),
    ("thirtyninth_seg_trainer_small_batch", "model-changed-per-rank",
     ["`if bs < MIN_BN_BATCH:` (seg_trainer_small_batch.py:59) follows from the rank",
      "`bs = local_batch_size(rank, world)` (line 57)", "`p.requires_grad_(False)`, line 38"],
     ["all_reduce with MIN or MAX"]),
    ("thirtyninth_multiscale_cls_trainer", "inputs-sized-per-rank",
     ["picked by `SCALES[rank % len(SCALES)]` (multiscale_cls_trainer.py:32)", "rank 1's inputs do not fit it"],
     ["nn.AdaptiveAvgPool2d(1)", "the same size at each step"]),
    ("thirtyninth_video_clip_trainer", "per-rank-list-too-short",
     ["`FRAME_STRIDES[rank]` (video_clip_trainer.py:50)", "`FRAME_STRIDES = [1, 2]` (line 11), which has 2 entries "
      "for the 4 ranks of this launch: ranks 2, 3 index past its end"], ["FRAME_STRIDES[rank % len(FRAME_STRIDES)]"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("thirtyninth_packed_lm_trainer", 'os.environ["PACK_LEN"] = str(pack_len)', "chosen = str(pack_len)",
     "env-set-by-the-job"),
    ("thirtyninth_staged_growth_trainer", "world = dist.get_world_size()", "world = dist.get_world_size(group)",
     "sized-by-world-not-group"),
    ("thirtyninth_seg_trainer_small_batch", "if bs < MIN_BN_BATCH:", "if GLOBAL_BATCH < MIN_BN_BATCH:",
     "model-changed-per-rank"),
    ("thirtyninth_video_clip_trainer", "FRAME_STRIDES = [1, 2]", "FRAME_STRIDES = [1, 2, 1, 2]",
     "per-rank-list-too-short"),
    ("thirtyninth_multiscale_cls_trainer", "SCALES[rank % len(SCALES)]", "SCALES[0]", "inputs-sized-per-rank"),
]


def test_the_call_the_traceback_passed_through_is_the_one_given_the_wrapper():
    """The job also saves `student.module.state_dict()` (the module inside, rightly): the call named is the deepcopy
    the traceback went through, not the first call of the file that mentions a wrapped model."""
    title = diagnose(sample("thirtyninth_distill_phase_job"))[0].title
    assert "copy.deepcopy(teacher)" in title and "torch.save" not in title
    inner = diagnose(with_source(sample("thirtyninth_distill_phase_job"), "copy.deepcopy(teacher)",
                                 "copy.deepcopy(teacher.module)"))[0]
    # torch's message still says it, but no call of the code hands on the wrapper now: none is named
    assert inner.cause == "ddp-wrapper-passed-on" and "torch.save(" not in inner.title
    assert "teacher.module)` (" not in inner.title
