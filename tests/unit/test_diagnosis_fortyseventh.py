"""The forty-seventh held-out batch's mended misses (bench/diagnosis/FORTYSEVENTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from dataclasses import replace

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyseventh_continual_eval_matrix", "gathered-vector-read-as-a-number",
     ["`correct` (continual_eval_matrix.py:71) holds one value per rank", "`float(correct)`"], ["correct.sum()"]),
    ("fortyseventh_exemplar_replay_trainer", "entry-made-by-its-owner-only",
     ["`memory`'s entries are set only where `task % world == rank` holds (exemplar_replay_trainer.py:86)"],
     ["broadcast_object_list([entry], src=owner)"]),
    ("fortyseventh_hardness_curriculum_trainer", "sentinel-wins-the-merge",
     ["`self.losses` starts at +inf", "merged over the ranks with MAX (line 33)"], ["the value that loses the MAX"]),
    ("fortyseventh_eval_streaming_classifier", "data-not-sharded",
     ["StreamingEvalSet, an IterableDataset", "never by rank"],
     ["(rank * num_workers + worker_id)::(world * num_workers)", "a sampler cannot shard an IterableDataset"]),
    ("fortyseventh_train_bucketed_tagger", "length-of-the-whole",
     ["BucketBatchSampler.__len__ (train_bucketed_tagger.py:48) counts every rank's"],
     ["make BucketBatchSampler.__len__ count this rank's share"]),
    ("fortyseventh_warm_decoded_cache", "node-budget-over-the-world",
     ["divides a node's worker budget by the whole job's world size: at 4 ranks it is 0 workers"],
     ["(LOCAL_WORLD_SIZE)", "max(1, ...)"]),
    ("fortyseventh_export_embedding_shards", "saved-view-of-the-whole",
     ["`table[start:end]` (export_embedding_shards.py:54) is a view of the whole tensor"],
     ["table[start:end].clone()"]),
    ("fortyseventh_tp_export_param_audit", "replicated-counted-per-rank",
     ["each rank counts the parameters it holds and the counts are summed over the ranks (tp_export_param_audit.py:55)"],
     ["a replicated one on one rank only"]),
    ("fortyseventh_release_recommender_export", "renormalized-by-forward",
     ["`nn.Embedding(items, dim, max_norm=1.0)` (release_recommender_export.py:18) has max_norm"],
     ["instead of max_norm"]),
    ("fortyseventh_train_keyword_spotter", "batches-across-a-strided-shard",
     ["`range(rank, len(store), world)` (train_keyword_spotter.py:55) gives each rank every world-th item"],
     ["deal whole batches to the ranks"]),
    ("fortyseventh_consolidate_pruned_checkpoint", "assembled-by-a-sum",
     ["`full` is assembled by writing each rank's part into zeros (consolidate_pruned_checkpoint.py:53)"],
     ["assemble by copying: all_gather"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyseventh_continual_eval_matrix", "return torch.cat(out)", "return torch.cat(out).sum()",
     "gathered-vector-read-as-a-number"),
    ("fortyseventh_exemplar_replay_trainer", "memory[task] = herding(model, x, y, EXEMPLARS_PER_CLASS)",
     "memory[task] = herding(model, x, y, EXEMPLARS_PER_CLASS); dist.broadcast_object_list([memory], src=0)",
     "entry-made-by-its-owner-only"),
    ("fortyseventh_hardness_curriculum_trainer", 'self.losses = torch.full((n,), float("inf"))',
     'self.losses = torch.full((n,), float("-inf"))', "sentinel-wins-the-merge"),
    ("fortyseventh_warm_decoded_cache", 'num_workers = CPU_WORKERS_PER_NODE // int(os.environ.get("WORLD_SIZE", "1"))',
     'num_workers = CPU_WORKERS_PER_NODE // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))',
     "node-budget-over-the-world"),
    ("fortyseventh_export_embedding_shards", "shard = table[start:end]", "shard = table[start:end].clone()",
     "saved-view-of-the-whole"),
    ("fortyseventh_tp_export_param_audit", "local = sum(p.numel() for p in model.parameters())", "local = 0",
     "replicated-counted-per-rank"),
    ("fortyseventh_release_recommender_export", "nn.Embedding(items, dim, max_norm=1.0)", "nn.Embedding(items, dim)",
     "renormalized-by-forward"),
    ("fortyseventh_train_keyword_spotter", "loader = DataLoader(shard, batch_size=BATCH, shuffle=False, drop_last=True)",
     "loader = DataLoader(shard, batch_size=BATCH, shuffle=False, drop_last=True, collate_fn=pad_batch)",
     "batches-across-a-strided-shard"),
    ("fortyseventh_consolidate_pruned_checkpoint", "full = torch.zeros_like(flat)", "full = flat.clone()",
     "assembled-by-a-sum"),
]


def test_a_sampler_whose_length_counts_its_share_is_not_told_as_counting_the_whole():
    changed = with_source(sample("fortyseventh_train_bucketed_tagger"), "        return len(self._batches())\n",
                          "        return len(self._batches()[self.rank::self.world])\n")
    assert "length-of-the-whole" not in [finding.cause for finding in diagnose(changed)]


def test_a_size_mismatch_in_a_job_with_max_norm_is_not_told_as_weights_renormalized():
    evidence = sample("fortyseventh_release_recommender_export")
    said = "replicas disagree on the release weights"
    resized = replace(evidence, nodes=[replace(node, lines=[line.replace(said, "shape mismatch in batch 3")
                                                            for line in node.lines]) for node in evidence.nodes])
    assert any(said in line for node in evidence.nodes for line in node.lines)
    assert "renormalized-by-forward" not in [finding.cause for finding in diagnose(resized)]
