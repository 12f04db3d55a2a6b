"""The sixteenth held-out batch's misses (bench/diagnosis/SIXTEENTH_BATCH_A.md, _B.md): each scored run's own record,
with the cause and fix the lab must now give first, and the same record changed where the finding must not fire."""

import pytest

from lab.analysis.diagnosis import diagnose
from tests.unit.test_diagnosis_fourteenth import with_log
from tests.unit.test_diagnosis_held_out import assert_told
from tests.unit.test_diagnosis_replicas import causes, sample
from tests.unit.test_diagnosis_sources import with_source

TOLD = [  # sample, cause, words of the title, words of the fix
    ("sixteenth_token_memmap_windows", "share-rounded-up",
     ["`per_rank = math.ceil(meta['n_tokens'] / world_size)` (token_memmap_windows.py:38)", "the last rank, 3"],
     ["end = min(start + per_rank, total)", "np.array_split"]),
    ("sixteenth_val_stream_resampled", "loop-over-endless-stream",
     ["loop at val_stream_resampled.py:67", "ShardStream.__iter__ never ends", "line 49"],
     ["itertools.islice(loader, steps)"]),
    ("sixteenth_val_stream_resampled_rerun", "loop-over-endless-stream",  # its worker seen in __iter__: producing
     ["ShardStream.__iter__ never ends"], ["itertools.islice(loader, steps)"]),
    ("sixteenth_metrics_unflushed_readback", "read-before-flushed",
     ["read rank0.jsonl at 0 bytes", "`self.fh = open(METRICS / f'rank{rank}.jsonl', 'a')`"],
     ["self.fh.flush()", "buffering=1"]),
    ("sixteenth_loader_timeout_no_workers", "loader-timeout-without-workers",
     ["num_workers=workers at loader_timeout_no_workers.py:45"], ["timeout=120 if num_workers > 0 else 0"]),
    ("sixteenth_resume_consumed_samples", "global-count-skips-own-indices",
     ["`state['consumed_samples'] += len(idx) * world`", "`indices[self.start_index:]`, line 46"],
     ["resume_from(state['consumed_samples'] // world_size)"]),
]


@pytest.mark.parametrize("name, cause, title, fix", TOLD, ids=[told[0] for told in TOLD])
def test_the_held_out_record_is_told_its_cause_and_fix(name, cause, title, fix):
    assert_told(name, cause, title, fix)


def test_an_exact_share_a_flushed_file_and_a_finite_stream_are_not_these_causes():
    exact = with_source(sample("sixteenth_token_memmap_windows"), "math.ceil(meta[\"n_tokens\"] / world_size)",
                        "meta[\"n_tokens\"] // world_size")
    assert "share-rounded-up" not in causes(exact)
    flushed = with_source(sample("sixteenth_metrics_unflushed_readback"), "    dist.barrier()  # every rank",
                          "    log.fh.flush()\n    dist.barrier()  # every rank")
    assert "read-before-flushed" not in causes(flushed)
    finite = with_source(sample("sixteenth_val_stream_resampled"), "shards = iter(lambda: rng.choice(self.shards), None)",
                         "shards = [rng.choice(self.shards) for _ in self.shards]")
    assert "loop-over-endless-stream" not in causes(finite)


def test_a_per_rank_count_given_to_the_sampler_is_not_a_global_one():
    per_rank = with_source(sample("sixteenth_resume_consumed_samples"), "len(idx) * world", "len(idx)")
    assert "global-count-skips-own-indices" not in causes(per_rank)


def test_an_argument_error_that_names_a_timeout_is_the_ranks_own_crash_not_an_echo():
    """"requires timeout == 0" is an argument refused: every rank's crash, not a peer's failure echoed back."""
    evidence = with_log(sample("sixteenth_loader_timeout_no_workers"), "_SingleProcessDataLoaderIter requires",
                        "the loader requires")  # no rule of its own: the crash as every rank raised it
    assert diagnose(evidence)[0].cause == "rank-crashed"
