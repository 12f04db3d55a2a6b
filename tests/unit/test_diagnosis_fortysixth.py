"""The forty-sixth held-out batch's mended misses (bench/diagnosis/FORTYSIXTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortysixth_stream_generate_server", "bool-summed-as-count",
     ["`drained` (stream_generate_server.py:72) is a bool tensor", "`int(drained.item()) == world`, line 75"],
     ["count in an integer tensor", "ReduceOp.MIN for 'every rank'"]),
    ("fortysixth_rerank_candidates", "columns-sharded-differently",
     ["`my_ids = m['ids'][rank::world]` (rerank_candidates.py:57) deals items to the ranks strided",
      "(line 59) in blocks"], ["shard every column with the same index set"]),
    ("fortysixth_latency_benchmark", "statistic-of-a-small-share",
     ["(latency_benchmark.py:40) needs several values", "`reqs[rank * per:(rank + 1) * per]`, line 60"],
     ["gather the raw values from every rank first"]),
    ("fortysixth_embed_corpus", "threads-divided-again",
     ["`threads = node_threads // local_world` (line 30) divides OMP_NUM_THREADS by the node's processes"],
     ["use OMP_NUM_THREADS as it is", "max(1, ...)"]),
    ("fortysixth_retrieval_eval", "joined-into-the-features",
     ["`torch.stack(parts, dim=1).flatten(1)` (retrieval_eval.py:34) joins the ranks' gathered parts along a "
      "dimension other than the samples'", "a width of 96 met 48"], ["torch.cat(parts, dim=0)"]),
    ("fortysixth_contrastive_pretrain", "labels-offset-past-the-logits",
     ["the logits hold every rank's gathered rows, and `rank * batch_size` (line 58)"],
     ["labels = torch.arange(B) + rank * B"]),
    ("fortysixth_caption_decoder_train", "grad-mode-left-off",
     ["`torch.set_grad_enabled(False)` (caption_decoder_train.py:43)", "returns at line 45 without turning it back on"],
     ["`with torch.no_grad():`"]),
    ("fortysixth_lm_chunked_ce_train", "plain-tensor-into-dtensor",
     ["`self.lm_head.weight` is read in chunked_loss() (lm_chunked_ce_train.py:52), outside lm_head's forward"],
     ["register_fsdp_forward_method(model, 'chunked_loss')"]),
    ("fortysixth_packed_stream_perplexity", "split-mid-record",
     ["`tokens` is this rank's slice of a stream cut at a fixed offset (`stream[rank * per:end]`"],
     ["cut the stream at record boundaries"]),
    ("fortysixth_vocab_parallel_embed_eval", "padding-index-of-the-whole",
     ["(vocab_parallel_embed_eval.py:26) is this rank's rows of a vocabulary split over the ranks"],
     ["padding_idx = pad_id - start on the rank whose [start, end) holds it"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortysixth_stream_generate_server", "drained = torch.tensor(not pending)",
     "drained = torch.tensor(int(not pending))", "bool-summed-as-count"),
    ("fortysixth_rerank_candidates", "my_lengths = np.array_split(np.asarray(m[\"lengths\"]), world)[rank]",
     "my_lengths = np.asarray(m[\"lengths\"])[rank::world]", "columns-sharded-differently"),
    ("fortysixth_latency_benchmark", "dist.all_gather_object(table, summary)", "table = [summary] * world",
     "statistic-of-a-small-share"),
    ("fortysixth_embed_corpus", "node_threads = int(os.environ.get(\"OMP_NUM_THREADS\", os.cpu_count() or 1))",
     "node_threads = os.cpu_count() or 1", "threads-divided-again"),
    ("fortysixth_retrieval_eval", "return torch.stack(parts, dim=1).flatten(1)", "return torch.cat(parts, dim=0)",
     "joined-into-the-features"),
    ("fortysixth_contrastive_pretrain", "labels = torch.arange(img.shape[0]) + rank * batch_size",
     "labels = torch.arange(img.shape[0])", "labels-offset-past-the-logits"),
    ("fortysixth_caption_decoder_train", "        return torch.cat([_greedy(model, c) for c in img.split(max_batch)])",
     "        img = img[:max_batch]", "grad-mode-left-off"),
    ("fortysixth_packed_stream_perplexity", "return stream[rank * per:end]", "return stream", "split-mid-record"),
    ("fortysixth_vocab_parallel_embed_eval",
     "self.table = nn.Embedding(self.end - self.start, dim, padding_idx=padding_idx)",
     "self.table = nn.Embedding(vocab, dim, padding_idx=padding_idx)", "padding-index-of-the-whole"),
]


def test_a_sharded_head_called_through_its_forward_is_not_told_as_read_outside_it():
    changed = with_source(sample("fortysixth_lm_chunked_ce_train"), "logits = h @ self.lm_head.weight.t()",
                          "logits = self.lm_head(h)")
    assert not any("outside lm_head's forward" in finding.title for finding in diagnose(changed))
