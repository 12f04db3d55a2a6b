"""The thirty-seventh held-out batch's mended misses (bench/diagnosis/THIRTYSEVENTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.calls import DistCall, arguments_that_differ
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyseventh_cfg_guidance_trainer", "ddp-state-uncopyable",
     ["copies rank 0's parameters and buffers into every other rank's, in place, when DistributedDataParallel is built",
      "the buffer 'null_emb' at cfg_guidance_trainer.py:32 is an expanded view"], [".clone()", "broadcast_buffers=False"]),
    ("thirtyseventh_ddpm_schedule_trainer", "ddp-state-uncopyable",
     ["before each forward", "the buffer 'betas' at ddpm_schedule_trainer.py:39",
      "are each a tensor made under torch.inference_mode()"], ["torch.no_grad() instead of torch.inference_mode()"]),
    ("thirtyseventh_edm_preconditioned_trainer", "ddp-state-uncopyable",
     ["the buffer 'freqs' at edm_preconditioned_trainer.py:31 is a tensor made under torch.inference_mode()"],
     ["torch.no_grad() instead of torch.inference_mode()"]),
    ("thirtyseventh_blur_diffusion_trainer", "ddp-state-uncopyable",
     ["the buffer 'blur' at blur_diffusion_trainer.py:41 is a sparse tensor"], [".to_dense()"]),
    ("thirtyseventh_eval_sampling_scores", "collective-return-used",
     ["gathered = dist.all_gather_object([None] * world, scores) (eval_sampling_scores.py:47)",
      "all_gather_object writes its result into the object_list it is given, so line 48 reads None"],
     ["gathered = [None] * world; dist.all_gather_object(gathered, scores)"]),
    ("thirtyseventh_serve_batch_requests", "collective-output-immutable",
     ["broadcast_object_list at serve_batch_requests.py:46 writes the objects it receives",
      "rank 1 gave it a tuple `batch` (read_requests() if rank == 0 else (None, None), line 45)"],
     ["give broadcast_object_list a list on every rank"]),
    ("thirtyseventh_shard_predict_merge", "parts-joined-as-whole",
     ["on `by_id`, merged from every rank's gathered records by their 'id'",
      "each rank numbered its own records from 0 (`enumerate(zip(probs, labels[lo:hi]))`, line 30)"],
     ["enumerate(..., start=lo), or lo + idx"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("thirtyseventh_eval_sampling_scores", "gathered = dist.all_gather_object([None] * world, scores)",
     "gathered = [None] * world; dist.all_gather_object(gathered, scores)", "collective-return-used"),
    ("thirtyseventh_shard_predict_merge", "enumerate(zip(probs, labels[lo:hi]))",
     "enumerate(zip(probs, labels[lo:hi]), start=lo)", "parts-joined-as-whole"),
]


def test_a_buffer_made_as_it_should_be_is_not_named_as_the_one_refused():
    """The copy still failed (the record's traceback is DDP's), but a view cloned, or a schedule made under no_grad,
    is not what refused it: the finding then says what DDP does and what such tensors must be, naming none."""
    cloned = diagnose(with_source(sample("thirtyseventh_cfg_guidance_trainer"), ".expand(batch, emb)",
                                  ".expand(batch, emb).clone()"))[0]
    assert cloned.cause == "ddp-state-uncopyable" and "null_emb" not in cloned.title and "inference_mode" in cloned.fix
    no_grad = diagnose(with_source(sample("thirtyseventh_ddpm_schedule_trainer"), "@torch.inference_mode()",
                                   "@torch.no_grad()"))[0]
    assert "'betas'" not in no_grad.title


def test_receivers_lists_of_none_are_how_broadcast_object_list_is_called_not_a_difference():
    """Their contents are replaced by the source's objects: only the lengths have to agree (the fix "make what the
    ranks pass agree" was told for a tuple the receiving rank could not write into)."""
    def called(op, value):
        return DistCall(op, caller="job.py:9 in main", args=(("object_list", value),))
    same = {0: called("broadcast_object_list", "list of 2"), 1: called("broadcast_object_list", "list of 2, all None")}
    assert arguments_that_differ(same) == []
    shorter = {0: called("broadcast_object_list", "list of 2"), 1: called("broadcast_object_list", "list of 1, all None")}
    assert arguments_that_differ(shorter) == ["object_list: rank 0 list of 2; rank 1 list of 1"]
    gathered = {0: called("all_gather_object", "list of 2"), 1: called("all_gather_object", "list of 2, all None")}
    assert len(arguments_that_differ(gathered)) == 1  # what all_gather_object is given is not replaced: it differs


def test_an_error_in_ddps_copy_that_is_not_a_refused_write_is_not_told_as_one():
    """A size or an unrelated error raised in the same frames is the other rules' to tell, not a tensor to clone."""
    evidence = sample("thirtyseventh_cfg_guidance_trainer")
    refused = "unsupported operation: more than one element of the written-to tensor refers to a single memory location"
    other = replace(evidence, nodes=[replace(node, lines=[line.replace(refused, "expected all buckets to be ready")
                                                          for line in node.lines]) for node in evidence.nodes])
    assert "ddp-state-uncopyable" not in [finding.cause for finding in diagnose(other)]
