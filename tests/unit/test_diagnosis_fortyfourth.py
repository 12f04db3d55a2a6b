"""The forty-fourth held-out batch's mended misses (bench/diagnosis/FORTYFOURTH_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("fortyfourth_exact_dedup_report", "nothing-in-the-buffer",
     ["`torch.frombuffer(payload, dtype=torch.uint8)` (exact_dedup_report.py:36) was given an empty buffer on rank 1"],
     ["torch.empty(0, dtype=torch.uint8)"]),
    ("fortyfourth_minhash_dedup_exchange", "fixed-slot-too-small",
     ["all_gather_list() (minhash_dedup_exchange.py:41) gives every rank a slot of a fixed max_size = 16384"],
     ["all_gather the payloads' lengths first"]),
    ("fortyfourth_build_tfidf_index", "collective-in-cached-function",
     ["global_df() (build_tfidf_index.py:33) runs all_reduce"], ["do not cache a function that runs a collective"]),
    ("fortyfourth_tokenize_corpus_shards", "lock-held-by-a-node-mate",
     ["(tokenize_corpus_shards.py:35) asks for a lock without waiting", "one per node's disk"],
     ["named by its global rank", "LOCK_EX without LOCK_NB"]),
    ("fortyfourth_heat_diffusion_slab", "p2p-mismatch",
     ["rank 0 waits to receive from rank -1", "the job marks a missing neighbour with -1 (`PROC_NULL = -1`)"],
     ["skip the send and the receive where the neighbour is the sentinel"]),
    ("fortyfourth_parallel_tempering_ising", "tag-past-an-int",
     ["packed with `src << 30` (line 15)", "passes 2**31"], ["keep tags below 2**31"]),
    ("fortyfourth_poisson_jacobi_2d", "p2p-mismatch",
     ["names rank 0, itself, as its peer: torch.distributed has no send or receive to oneself"],
     ["do the exchange locally"]),
    ("fortyfourth_latency_benchmark", "gathered-tensors-compared",
     ["`max(per_rank)` (latency_benchmark.py:57) compares the ranks' gathered tensors"],
     ["torch.stack(per_rank).max(dim=0)"]),
    ("fortyfourth_md_slab_decomposition", "owner-index-reaches-world",
     ["`(pos[:, 0] / (BOX / world)).long()` (md_slab_decomposition.py:20)", "comes out as 2, a rank that does not "
      "exist", "`torch.linspace(0, BOX, side)` (md_slab_decomposition.py:62) includes its endpoint"],
     ["`.clamp_(max=world - 1)`"]),
    ("fortyfourth_validation_metrics", "collective-given-a-number",
     ["a collective was given a Python number"], ["put the value in a tensor"]),
    ("fortyfourth_eval_gather_logits", "gathered-into-a-stacked-output",
     ["all_gather_into_tensor at eval_gather_logits.py:41 was given an output in the stacked layout"],
     ["torch.empty((world * n, *rest))"]),
    ("fortyfourth_sharded_test_scoring", "scattered-uneven-blocks",
     ["`torch.tensor_split(ids, world)` (line 31) cuts the data into blocks of different sizes"],
     ["pad every block to ceil(n / world)"]),
]

NOT_TOLD = [  # sample, the text of the job, what it becomes, the cause that must then not be told
    ("fortyfourth_minhash_dedup_exchange", "def all_gather_list(data, max_size=16384):",
     "def all_gather_list(data, max_size=None):", "fixed-slot-too-small"),
    ("fortyfourth_parallel_tempering_ising", "return (src << 30) | (kind << 28) | (step % (1 << 28))",
     "return step * 2 + kind", "tag-past-an-int"),
    ("fortyfourth_latency_benchmark", "slowest = max(per_rank)", "slowest = max(medians)",
     "gathered-tensors-compared"),
    ("fortyfourth_md_slab_decomposition", "return (pos[:, 0] / (BOX / world)).long()",
     "return (pos[:, 0] / (BOX / world)).long().clamp(max=world - 1)", "owner-index-reaches-world"),
    ("fortyfourth_sharded_test_scoring", "blocks = list(torch.tensor_split(ids, world))", "blocks = list(padded)",
     "scattered-uneven-blocks"),
]


def test_a_minus_one_peer_without_a_sentinel_keeps_the_world_size_fix():
    """A peer of -1 where the job marks no missing neighbour with it: the peer was computed wrong, and the fix
    computes it from the world size."""
    changed = with_source(sample("fortyfourth_heat_diffusion_slab"), "PROC_NULL = -1", "PROC_NULL = None")
    assert "sentinel" not in " ".join(finding.fix for finding in diagnose(changed) if finding.cause == "p2p-mismatch")
    assert "p2p-mismatch" in causes(changed)
