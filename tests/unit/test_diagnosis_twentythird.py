"""The twenty-third held-out batch's mended misses (bench/diagnosis/TWENTYTHIRD_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace


from lab.analysis.calls import Tensor
from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample, with_calls
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("twentythird_eval_multilingual_generate", "text-cut-at-bytes",
     ["a UTF-8 text ends inside a multi-byte character (the one that starts at byte 47",
      "all_gather at eval_multilingual_generate.py:55 as fixed-width bytes (uint8[6x49])"],
     ["make the buffer as wide as the longest encoded string", "all_gather_object"]),
    ("twentythird_epoch_shard_planner", "port-in-use",
     ["binds at epoch_shard_planner.py:23", "the loop at line 76", "without SO_REUSEADDR", "TIME_WAIT"],
     ["srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)", "keep it open across the loop"]),
    ("twentythird_rollout_weight_sync", "partial-recv",
     ["`blob = s.recv(size)` (line 57) takes what one recv returns", "(rollout_weight_sync.py:58) got part of it"],
     ["loop on recv and append until len(data) == size", "MSG_WAITALL"]),
    ("twentythird_ctr_tabular_trainer", "made-on-some-ranks",
     ["rank 1's lazy layers (LazyLinear) had no shapes when DDP wrapped `model` (ctr_tabular_trainer.py:73)",
      "only under `if rank == 0:` (line 70)"], ["run the first forward on every rank before wrapping"]),
    ("twentythird_lm_finetune_tied", "ddp-parameter-mismatch",
     ["rank 0 has 28 parameters and rank 1 29", "`self.lm_head.weight = self.tok_emb.weight`, lm_finetune_tied.py:23",
      "unties them"], ["tie the weights again after to_empty()"]),
    ("twentythird_knn_memory_classifier", "shape-mismatch",
     ["the ranks' models hold buffers of different sizes", "(knn_memory_classifier.py:30)",
      "DDP broadcasts rank 0's parameters and buffers"],
     ["keep per-rank data out of the wrapped module's buffers", "broadcast_buffers=False"]),
    ("twentythird_finetune_from_flax_export", "ddp-parameter-mismatch",
     ["rank 1's params[0] has the shape of process 0's ([128, 48]) but another memory layout (strides)",
      "`model.load_state_dict(state, assign=True)`, finetune_from_flax_export.py:55"], [".T.contiguous()"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("twentythird_rollout_weight_sync", "blob = s.recv(size)", "blob = s.makefile('rb').read(size)", "partial-recv"),
    ("twentythird_ctr_tabular_trainer", "    if rank == 0:\n        log_model_summary(",
     "    if True:\n        log_model_summary(", "made-on-some-ranks"),  # the first forward ran everywhere
]


def test_a_port_bound_once_with_so_reuseaddr_is_not_time_wait():
    """The same record where the job sets SO_REUSEADDR: the port is held by something else, as before."""
    evidence = with_source(sample("twentythird_epoch_shard_planner"), "    srv.bind((",
                           "    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind((")
    top = diagnose(evidence)[0]
    assert top.cause == "port-in-use" and "TIME_WAIT" not in top.title and "another process" in top.title


def test_text_cut_with_no_byte_collective_says_where_such_cuts_come_from():
    """Without the uint8 all_gather in the record the finding still names the mechanism, not the collective."""
    evidence = sample("twentythird_eval_multilingual_generate")
    plain = with_calls(evidence, recent=tuple(
        replace(call, tensors=(Tensor((6, 49), "float32"),)) if call.op == "all_gather" else call
        for call in evidence.traces[0].calls.recent))
    top = diagnose(plain)[0]
    assert top.cause == "text-cut-at-bytes" and "all_gather" not in top.title and "a byte count" in top.title


def test_a_parameter_count_that_differs_without_a_tie_is_not_told_as_untied():
    evidence = with_source(sample("twentythird_lm_finetune_tied"), "self.lm_head.weight = self.tok_emb.weight",
                           "self.lm_head.bias = None")
    top = diagnose(evidence)[0]
    assert top.cause == "ddp-parameter-mismatch" and "ties" not in top.title


def test_sizes_that_differ_in_a_job_with_no_buffers_are_not_told_as_buffers():
    evidence = with_source(sample("twentythird_knn_memory_classifier"), "self.register_buffer(", "setattr(self, ")
    top = diagnose(evidence)[0]
    assert top.cause == "shape-mismatch" and "buffers of different sizes" not in top.title
