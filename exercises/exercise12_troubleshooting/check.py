"""Checks for exercise 12: each broken launch failed by itself, for its own reason (torch's telltale message in
the node logs), without any rank getting as far as a result; then the fixed launch summed correctly.

The messages are what torch 2.x prints with the gloo backend and LAB_PG_TIMEOUT set: node0 hosts the store and
counts the clients that joined, the other nodes report why they could not reach it.
"""

from lab.jobs.checks import (Check, RunOutcome, StepOutcome, all_ranks_present, every_rank, failed_on_its_own, in_step,
                        log_matches)

UNREACHABLE_ADDR = r"224\.0\.0\.1"  # trouble.py's UNREACHABLE_ADDR
MISSING_INTERFACE = "nosuchif0"  # trouble.py's MISSING_INTERFACE


def telltales(n: int) -> dict[str, list[tuple[str, str, list[int]]]]:
    """step -> (what the message shows, regex, the nodes whose log must match it), for `n` nodes."""
    others = list(range(1, n))
    alone = (f"node0's store waited for the others in vain (1/{n} clients joined)",
             rf"waiting for clients\. 1/{n} clients joined", [0])
    return {
        "wrong-master-addr": [
            alone,
            ("the other nodes could not connect to the wrong MASTER_ADDR",
             rf"scenario wrong-master-addr failed: DistNetworkError: .*failed to connect to .*{UNREACHABLE_ADDR}", others),
        ],
        "wrong-port": [
            alone,
            ("the other nodes found nothing listening on the wrong MASTER_PORT",
             r"scenario wrong-port failed: DistNetworkError: .*(timed out|refused).*connect", others),
        ],
        "world-size-mismatch": [
            (f"node0's store counted {n} of the {n + 1} processes WORLD_SIZE promised",
             rf"waiting for clients\. {n}/{n + 1} clients joined", [0]),
        ],
        "wrong-ifname": [
            (f"every node's gloo found no interface named {MISSING_INTERFACE}",
             rf"scenario wrong-ifname failed: .*Unable to find address for: {MISSING_INTERFACE}", list(range(n))),
        ],
        "shape-mismatch": [
            ("TORCH_DISTRIBUTED_DEBUG=DETAIL was set on every node",
             r"scenario shape-mismatch: .*TORCH_DISTRIBUTED_DEBUG=DETAIL", list(range(n))),
        ] + [
            (f"DETAIL named rank {rank}'s all_reduce of shape [{rank + 2}] and the mismatched shapes",
             rf"Rank {rank} is running collective: CollectiveFingerPrint\(.*OpType=ALLREDUCE, TensorShape=\[{rank + 2}\]"
             r".*Tensor shapes: \d+ ?vs ?\d+", [rank])
            for rank in range(n)
        ],
    }


def no_results(step: StepOutcome) -> Check:
    """A launch that breaks before or in the first collective leaves no rank with a result."""
    return Check(f"{step.name}: no rank got as far as writing a result", not step.results,
                 "" if not step.results else f"ranks {sorted(step.results)} reported")


def check(run: RunOutcome) -> list[Check]:
    n = run.nnodes
    checks = []
    for name, messages in telltales(n).items():
        step = run.step(name)
        checks += [failed_on_its_own(step), no_results(step)]
        checks += [in_step(name, log_matches(label, step, pattern, nodes)) for label, pattern, nodes in messages]
    fixed = run.step("fixed")
    total = float(n * (n + 1) // 2)
    checks += [
        in_step("fixed", all_ranks_present(fixed, n)),
        in_step("fixed", every_rank(f"world size is {n} on every rank", fixed.results, "world_size", n)),
        in_step("fixed", every_rank(f"all_reduce gave 1+...+{n} = {total:g} in both elements on every rank",
                                    fixed.results, "all_reduce", [total, total])),
    ]
    return checks
