"""Checks for exercise 01: every node joined once, as its own rank, on its own host, at node0, and the sum is right.

The program starts one process per node whatever --nproc-per-node says, so the world is the node count.
"""

from lab.jobs.checks import Check, RunOutcome, all_ranks_present, distinct_hosts, every_rank, same_value


def check(run: RunOutcome) -> list[Check]:
    results = run.results
    n = run.nnodes
    rank0 = results.get(0, {})
    master_is_rank0 = rank0.get("master_addr_is_this_host") is True
    return [
        all_ranks_present(run, n),
        every_rank("each node joined as rank NODE_RANK", results, "node_rank", lambda result: result["rank"]),
        every_rank(f"world size is {n} on every rank", results, "world_size", n),
        distinct_hosts(results, "node_rank", n),
        same_value("every rank met at the same MASTER_ADDR", results, "master_addr"),
        same_value("every rank met at the same MASTER_PORT", results, "master_port"),
        Check("MASTER_ADDR is an address of rank 0's host (node0)", master_is_rank0,
              "" if master_is_rank0 else f"rank 0 cannot bind to MASTER_ADDR {rank0.get('master_addr')!r}"),
        every_rank(f"all_reduce sum is 1+...+{n} = {n * (n + 1) // 2} on every rank", results, "all_reduce_sum",
                   n * (n + 1) // 2),
    ]
