"""Checks for exercise 08: three ways of averaging give identical replicas and identical parameters; skipping the
initial broadcast leaves the replicas different."""

from lab.jobs.checks import Check, RunOutcome, all_different, all_ranks_present, every_rank, same_value


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    rank0 = results.get(0, {})
    trained = bool(rank0) and rank0.get("by_hand_hash") != rank0.get("initial_hash")
    return [
        all_ranks_present(run, run.world_size),
        all_different("unseeded initial weights differ on every rank", results, "initial_hash"),
        same_value("by hand (broadcast, all_reduce / world size): replicas identical", results, "by_hand_hash"),
        same_value("by post-accumulate-grad hooks: replicas identical", results, "by_hook_hash"),
        same_value("by DDP: replicas identical", results, "by_ddp_hash"),
        every_rank("hooks give the same parameters as averaging by hand", results, "by_hook_hash",
                   lambda result: result.get("by_hand_hash")),
        every_rank("DDP gives the same parameters as averaging by hand", results, "by_ddp_hash",
                   lambda result: result.get("by_hand_hash")),
        Check("training changed the weights rank 0 broadcast", trained,
              "" if trained else "rank 0's by-hand parameters equal its initial ones (or rank 0 did not report)"),
        all_different("without the initial broadcast every replica ends different", results, "no_broadcast_hash"),
    ]
