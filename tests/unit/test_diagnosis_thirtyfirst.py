"""The thirty-first held-out batch's mended misses (bench/diagnosis/THIRTYFIRST_BATCH.md): each scored run's own
record, with the cause and fix the lab must now give first, and the same record changed where it must not."""

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_replicas import sample

TOLD = [  # sample, cause, words of the title, words of the fix
    ("thirtyfirst_eval_fraud_auc", "share-not-representative",
     ["rank 0 failed at `raise ValueError('Only one class present in y_true.",
      "on what it computed from its own contiguous block of the data (`x_local, y_local = (x[lo:hi], y[lo:hi])`"],
     ["all_reduce its sufficient statistics", "take an interleaved share (data[rank::world])"]),
    ("thirtyfirst_fit_ridge_regions", "share-not-representative",
     ["every rank failed at `chol = torch.linalg.cholesky(gram)`", "`return (region[lo:hi], numeric[lo:hi], y[lo:hi]"],
     ["X^T X and X^T y"]),
    ("thirtyfirst_advection_halo_1d", "rank-zero-as-false",
     ["rank 1 skipped its exchange with rank 0: `if left:` (advection_halo_1d.py:24)",
      "(`left = rank - 1 if rank > 0 else None`)"], ["`if left is not None:`"]),
    ("thirtyfirst_md_lennard_jones", "object-not-picklable",
     ["torch.save at md_lennard_jones.py:58", "a live ProcessGroup object"],
     ["save only the state", "a __getstate__ that leaves the handle out"]),
    ("thirtyfirst_spectral_poisson_solver", "view-of-a-split",
     ["`spec.reshape(rows, world, cols // world)` (spectral_poisson_solver.py:28) cuts a dimension into world-size "
      "parts", "with 2 ranks that dimension is no multiple of 2"], ["input_split_sizes", "pad it to a multiple"]),
]

NOT_TOLD = [  # sample, its source changed (from, to) so that the mechanism is not what happened, the cause it must not be
    ("thirtyfirst_eval_fraud_auc", "x_local, y_local = x[lo:hi], y[lo:hi]",
     "x_local, y_local = x[rank::world_size], y[rank::world_size]", "share-not-representative"),  # interleaved
    ("thirtyfirst_fit_ridge_regions", "return region[lo:hi], numeric[lo:hi], y[lo:hi]",
     "return region[rank::world_size], numeric[rank::world_size], y[rank::world_size]", "share-not-representative"),
    ("thirtyfirst_advection_halo_1d", "    if left:", "    if left is not None:", "rank-zero-as-false"),
    ("thirtyfirst_spectral_poisson_solver", "spec.reshape(rows, world, cols // world)", "spec.reshape(rows, 1, cols)",
     "view-of-a-split"),
]


def test_a_neighbours_test_computed_from_the_rank_is_not_a_branch_on_each_ranks_own_values():
    """`if up >= 0` with `up, down = rank - 1, rank + 1` tests the rank: the first and last rank have one neighbour
    by design, so "decide it together" cannot help; a test of a value a call computes from the rank's data can."""
    assert diagnose(sample("thirtyfirst_multigrid_pressure_solve"))[0].cause != "collective-under-own-condition"
