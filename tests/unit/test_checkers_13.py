"""The checker of exercise 13 on hand-built outcomes: what theory predicts passes, and each wrong result fails the
check about it; step times are required to order only when a shaped link is the bottleneck."""

import copy

import pytest

from lab.jobs.exercises import find
from tests.unit.checker_helpers import assert_fails, failed, outcome

GRADIENT_BYTES = 8_404_992
K = 4


def variant(step_ms: float, sent: float, calls: float = 1, accumulation: int = 1, hook: str = "allreduce_hook",
            no_sync_ms: float | None = None) -> dict:
    return {"bucket_cap_mb": 25, "hook": hook, "accumulation": accumulation, "samples_per_step": 8 * accumulation,
            "step_seconds": [step_ms / 1e3] * 6, "no_sync_seconds": [no_sync_ms / 1e3] * 18 if no_sync_ms else [],
            "allreduce_calls_per_step": calls, "tx_bytes_per_step": sent, "final_loss": 0.4325991,
            "params_hash": f"{hook}-{accumulation}-{calls}"}


def results(compute_ms: float, comm_ms: float) -> dict[int, dict]:
    """Two ranks as theory has them: a step is computation + communication, fp16 halves the bytes and their time,
    accumulation pays the communication once per K micro-batches."""
    sent = GRADIENT_BYTES * 1.002  # gloo's own messages on top
    variants = {
        "fp32": variant(compute_ms + comm_ms, sent),
        "small-buckets": {**variant(compute_ms + comm_ms * 0.8, sent * 1.001, calls=8), "bucket_cap_mb": 1},
        "fp16": {**variant(compute_ms + comm_ms / 2, sent / 2, hook="fp16_compress_hook"),
                 "max_param_diff_vs_fp32": 5e-8, "max_param_vs_fp32": 0.044, "final_loss": 0.4325992},
        "accumulate": variant(K * compute_ms + comm_ms, sent, accumulation=K, no_sync_ms=compute_ms),
    }
    return {rank: {"rank": rank, "world_size": 2, "hostname": f"node{rank}", "variants": copy.deepcopy(variants)}
            for rank in range(2)}


def run(data, link: str | None = "1gbit"):
    return outcome(data, nnodes=2, nproc=1, link=link)


@pytest.fixture(scope="module")
def checker():
    return find("13").load_checker()


@pytest.mark.parametrize("compute_ms,comm_ms", [(20, 200), (20, 5)])
def test_what_theory_predicts_passes_on_a_slow_and_a_fast_link(checker, compute_ms, comm_ms):
    assert failed(checker, run(results(compute_ms, comm_ms))) == []


def test_timing_is_required_only_when_bandwidth_bound(checker):
    bound = [check.name for check in checker(run(results(20, 200)))]
    assert any("bandwidth-bound: fp16" in name for name in bound)
    fast = checker(run(results(20, 5)))
    [shown] = [check for check in fast if check.name.startswith("timing:")]
    assert "not the bottleneck" in shown.detail and not any("bandwidth-bound" in c.name for c in fast)


def test_an_unshaped_link_never_requires_the_order_however_high_the_share(checker):
    """Unshaped, the all_reduce is the host's CPUs copying bytes: on a busy host the share reached 90 % while fp16,
    whose casts cost CPU too, was slower (63 vs 55 ms)."""
    data = results(5.5, 50)
    for result in data.values():
        result["variants"]["fp16"]["step_seconds"] = [0.063] * 6
    assert_fails(checker, run(data), "fp16 steps are faster")
    unshaped = checker(run(data, link=None))
    [shown] = [check for check in unshaped if check.name.startswith("timing:")]
    assert shown.passed and "unshaped" in shown.detail and "fp16 63 vs fp32 56 ms" in shown.detail
    assert failed(checker, run(data, link=None)) == []


def test_fp16_slower_than_fp32_on_a_slow_link_fails(checker):
    data = results(20, 200)
    for result in data.values():
        result["variants"]["fp16"]["step_seconds"] = [0.3] * 6
    assert_fails(checker, run(data), "fp16 steps are faster")


def test_accumulation_no_cheaper_per_sample_fails(checker):
    data = results(20, 200)
    for result in data.values():
        result["variants"]["accumulate"]["step_seconds"] = [4 * 0.22] * 6
    assert_fails(checker, run(data), "less time per sample")


def test_replicas_that_drift_apart_fail(checker):
    data = results(20, 5)
    data[1]["variants"]["fp16"]["params_hash"] = "other"
    assert_fails(checker, run(data), "fp16: parameters identical")


def test_fp16_sending_full_bytes_fails(checker):
    data = results(20, 5)
    data[0]["variants"]["fp16"]["tx_bytes_per_step"] = GRADIENT_BYTES
    assert_fails(checker, run(data), "half the bytes")


def test_accumulation_that_syncs_every_micro_batch_fails(checker):
    data = results(20, 5)
    data[1]["variants"]["accumulate"]["tx_bytes_per_step"] = K * GRADIENT_BYTES  # no_sync forgotten
    assert_fails(checker, run(data), "bytes per sample drop")


def test_bucket_cap_that_changes_nothing_fails(checker):
    data = results(20, 5)
    data[0]["variants"]["small-buckets"]["allreduce_calls_per_step"] = 1
    assert_fails(checker, run(data), "more all_reduce calls")


@pytest.mark.parametrize("key,value", [("max_param_diff_vs_fp32", 1e-3), ("final_loss", 0.5)])
def test_fp16_far_from_fp32_fails(checker, key, value):
    data = results(20, 5)
    data[0]["variants"]["fp16"][key] = value
    assert_fails(checker, run(data), "fp16 training stays within")


def test_missing_rank_and_missing_values_fail(checker):
    data = results(20, 70)
    del data[1]
    data[0]["variants"].pop("accumulate")
    names = failed(checker, run(data))
    assert "all 2 ranks reported" in names and "step times recorded for every variant" in names
