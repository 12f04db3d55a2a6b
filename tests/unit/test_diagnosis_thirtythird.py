"""The thirty-third held-out batch's mended misses (bench/diagnosis/THIRTYTHIRD_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtythird_topk_compressed_trainer", "size-from-rank-data",
     ["the ranks passed tensors of different sizes to the all_gather at topk_compressed_trainer.py:29",
      "`top_size = max(1, int(0.5 * self.rank * grad.numel()))` (line 21)"],
     ["compute the size from what every rank shares", "not from the rank"]),
    ("thirtythird_split_mlp_pipeline", "layers-dealt-round-robin",
     ["rank 0 failed at `out = stage(inp)` (split_mlp_pipeline.py:43", "(`layers[rank::world]`, line 16)"],
     ["give each rank a contiguous block of layers"]),
    ("thirtythird_blocklist_filter", "characters-counted-for-bytes",
     ["to the broadcast at blocklist_filter.py:42: the length sent is `len(text)` (line 36)",
      "the buffer is `text.encode()` (line 39)"], ["encode first and send the encoded length"]),
    ("thirtythird_local_sgd_trainer", "rank-crashed",
     ["rank 0 crashed with ValueError: Default group size only takes effect when CUDA is available"],
     ["as the message advises: If your subgroup using a backend that does not depend on CUDA,please pass in "
      "'group_size' correctly."]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtythird_topk_compressed_trainer", "int(0.5 * self.rank * grad.numel())", "int(0.5 * grad.numel())",
     "size-from-rank-data"),  # the same ratio on every rank
    ("thirtythird_blocklist_filter", "len(text) if rank == src", "len(text.encode('utf-8')) if rank == src",
     "characters-counted-for-bytes"),  # the length of the bytes
    ("thirtythird_split_mlp_pipeline", "mine = layers[rank::world]", "mine = layers[rank * 3:(rank + 1) * 3]",
     "layers-dealt-round-robin"),  # a contiguous block
]


def test_advice_is_read_where_the_message_leaves_out_the_space_after_a_stop_or_a_comma():
    from lab.analysis.diagnosis.crashes import message_advice
    assert message_advice("X needs a GPU available.If yours does not,please pass in 'size' correctly.") == \
        "If yours does not,please pass in 'size' correctly."
    assert message_advice("expected 1,024 rows but got 1,000") == ""  # a number's comma is no clause

