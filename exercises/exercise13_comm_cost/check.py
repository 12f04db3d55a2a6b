"""Checks for exercise 13: what DDP sends (counted on the wire), that compression and accumulation change it as
theory says, that replicas stay identical, and, where the link is the bottleneck, that the step times follow."""

from statistics import median

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, same_value

VARIANTS = ("fp32", "small-buckets", "fp16", "accumulate")
FP16_PARAM_TOLERANCE = 1e-3  # max |fp16 - fp32| of any parameter, relative to the largest |fp32| parameter
FP16_LOSS_TOLERANCE = 0.01  # relative difference of the final losses
FP16_BYTES = (0.4, 0.6)  # fp16 / fp32 bytes sent per step: half, give or take gloo's own messages
ACCUMULATION_SLACK = 0.2  # bytes per sample drop by k, within 20 %
# On a shaped link, communication at least this share of a synchronised step: the link is the bottleneck
# (measured: 93 % on a 1gbit link). An unshaped lab has no slow wire: its all_reduce is the host's CPUs copying
# bytes, which under a busy host also reached 90 % with fp16 slower (63 vs 55 ms, its casts cost CPU too), so
# there the orderings are shown, never required.
BANDWIDTH_BOUND = 0.9


def variant(result: dict, name: str) -> dict:
    return (result.get("variants") or {}).get(name) or {}


def per_rank(name: str, results: dict[int, dict], test) -> Check:
    """`test(result) -> (ok, text)` on every rank; the detail names each rank that failed and why."""
    wrong = {}
    for rank, result in sorted(results.items()):
        try:
            ok, text = test(result)
        except (KeyError, TypeError, ZeroDivisionError) as error:
            ok, text = False, f"missing or bad value ({error!r})"
        if not ok:
            wrong[rank] = text
    passed = bool(results) and not wrong
    return Check(name, passed, "" if passed else "; ".join(f"rank {rank}: {text}" for rank, text in wrong.items()))


def fp16_bytes(result: dict) -> tuple[bool, str]:
    ratio = variant(result, "fp16")["tx_bytes_per_step"] / variant(result, "fp32")["tx_bytes_per_step"]
    return FP16_BYTES[0] <= ratio <= FP16_BYTES[1], f"fp16/fp32 bytes per step {ratio:.2f}"


def accumulation_bytes(result: dict) -> tuple[bool, str]:
    plain, accumulated = variant(result, "fp32"), variant(result, "accumulate")
    k = accumulated["accumulation"]
    drop = (plain["tx_bytes_per_step"] / plain["samples_per_step"]) / (
        accumulated["tx_bytes_per_step"] / accumulated["samples_per_step"])
    return abs(drop - k) <= ACCUMULATION_SLACK * k, f"bytes per sample dropped {drop:.2f}x with k = {k}"


def more_buckets(result: dict) -> tuple[bool, str]:
    small, default = variant(result, "small-buckets"), variant(result, "fp32")
    calls, bytes_ratio = (small["allreduce_calls_per_step"], default["allreduce_calls_per_step"]), \
        small["tx_bytes_per_step"] / default["tx_bytes_per_step"]
    ok = calls[0] > calls[1] >= 1 and abs(bytes_ratio - 1) <= 0.1
    return ok, f"all_reduce calls per step {calls[0]:g} vs {calls[1]:g}, bytes ratio {bytes_ratio:.2f}"


def fp16_close(result: dict) -> tuple[bool, str]:
    fp16, fp32 = variant(result, "fp16"), variant(result, "fp32")
    relative = fp16["max_param_diff_vs_fp32"] / fp16["max_param_vs_fp32"]
    loss = abs(fp16["final_loss"] - fp32["final_loss"]) / abs(fp32["final_loss"])
    ok = relative <= FP16_PARAM_TOLERANCE and loss <= FP16_LOSS_TOLERANCE
    return ok, f"parameters differ by {relative:.1e} (relative), final losses by {loss:.1e}"


def communication_share(result: dict) -> float:
    """How much of an fp32 step is communication: 1 - (a micro-batch under no_sync) / (a synchronised step)."""
    compute = median(variant(result, "accumulate")["no_sync_seconds"])
    return max(0.0, 1 - compute / median(variant(result, "fp32")["step_seconds"]))


def timing_checks(result: dict, link: str | None) -> list[Check]:
    """Step times order as theory says once a shaped link is the bottleneck; on an unshaped one they need not."""
    try:
        share = communication_share(result)
        fp32, fp16 = (median(variant(result, name)["step_seconds"]) for name in ("fp32", "fp16"))
        accumulated = variant(result, "accumulate")
        per_sample = (fp32 / variant(result, "fp32")["samples_per_step"],
                      median(accumulated["step_seconds"]) / accumulated["samples_per_step"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
        return [Check("step times recorded for every variant", False, f"missing or bad value ({error!r})")]
    measured = f"communication {share:.0%} of an fp32 step"
    shown = f"(fp16 {fp16 * 1e3:.0f} vs fp32 {fp32 * 1e3:.0f} ms)"
    if link is None:
        note = (f"{measured} {shown}: an unshaped link is the host's CPUs copying bytes, not a slow wire, so the "
                "order is not required; try `lab up --link 1gbit`")
        return [Check("timing: the link is unshaped, orderings shown only", True, note)]
    if share < BANDWIDTH_BOUND:
        note = f"{measured} {shown}: the {link} link is not the bottleneck, so the order is not required"
        return [Check("timing: the link is fast next to the computation, orderings shown only", True, note)]
    return [
        Check("bandwidth-bound: fp16 steps are faster than fp32 ones", fp16 < fp32,
              f"{measured}; fp16 {fp16 * 1e3:.0f} ms vs fp32 {fp32 * 1e3:.0f} ms"),
        Check("bandwidth-bound: accumulation under no_sync costs less time per sample", per_sample[1] < per_sample[0],
              f"{measured}; {per_sample[1] * 1e3:.2f} vs {per_sample[0] * 1e3:.2f} ms per sample"),
    ]


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    checks = [all_ranks_present(run, run.world_size)]
    for name in VARIANTS:
        hashes = {rank: {"hash": variant(result, name).get("params_hash")} for rank, result in results.items()}
        checks.append(same_value(f"{name}: parameters identical on every rank", hashes, "hash"))
    checks += [
        per_rank("fp16 hook sends about half the bytes of fp32 (counted on eth0)", results, fp16_bytes),
        per_rank("accumulation under no_sync: bytes per sample drop about k times", results, accumulation_bytes),
        per_rank("smaller bucket_cap_mb: more all_reduce calls, the same bytes", results, more_buckets),
        per_rank(f"fp16 training stays within {FP16_PARAM_TOLERANCE:g} (parameters) and {FP16_LOSS_TOLERANCE:.0%} "
                 "(loss) of fp32", results, fp16_close),
    ]
    return checks + timing_checks(results.get(0, {}), run.link)
