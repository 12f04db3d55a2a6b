"""Checks for exercise 11: plain BatchNorm keeps each rank's own statistics, synchronised BatchNorm those of the
global batch; both recomputed here from the data definition in batches.py."""

from lab.jobs.checks import Check, RunOutcome, all_different, all_ranks_present, every_rank, every_rank_close, load_sibling

TOLERANCE = 1e-4  # relative; the program computes in float32
REFERENCE = "AllReduceBatchNorm"
TORCH_SYNC = "torch.nn.SyncBatchNorm"


def flatten(results: dict[int, dict]) -> dict[int, dict]:
    """rank -> {"plain_mean": [...], "plain_var": [...], "<implementation>_mean": [...], ...}."""
    flat = {}
    for rank, result in results.items():
        stats = {"plain": result.get("plain") or {}, **(result.get("synced") or {})}
        flat[rank] = {"rank": rank, "samples": result.get("samples"), "backend": result.get("backend")}
        for name, values in stats.items():
            flat[rank][f"{name}_mean"] = values.get("running_mean")
            flat[rank][f"{name}_var"] = values.get("running_var")
    return flat


def check(run: RunOutcome) -> list[Check]:
    batches = load_sibling(__file__, "batches")
    world = run.world_size
    flat = flatten(run.results)
    global_mean, global_var = batches.channel_stats(batches.global_batch(world))

    def own(result: dict) -> tuple[list[float], list[float]]:
        return batches.channel_stats(batches.local_batch(result["rank"]))

    implementations = [REFERENCE] + ([TORCH_SYNC] if any(r["backend"] == "nccl" for r in flat.values()) else [])
    checks = [
        all_ranks_present(run, world),
        every_rank("rank r held r + 2 samples (uneven batches)", flat, "samples", lambda result: result["rank"] + 2),
        every_rank_close("plain BatchNorm: running mean is the rank's own batch mean", flat, "plain_mean",
                         lambda result: own(result)[0], TOLERANCE),
        every_rank_close("plain BatchNorm: running var is the rank's own (unbiased) batch variance", flat, "plain_var",
                         lambda result: own(result)[1], TOLERANCE),
        all_different("plain BatchNorm: the running means differ from rank to rank", flat, "plain_mean"),
    ]
    for name in implementations:
        checks += [
            every_rank_close(f"{name}: running mean is the global batch's mean on every rank", flat, f"{name}_mean",
                             global_mean, TOLERANCE),
            every_rank_close(f"{name}: running var is the global batch's unbiased variance on every rank", flat,
                             f"{name}_var", global_var, TOLERANCE),
        ]
    return checks
