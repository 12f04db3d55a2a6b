"""Exercise 12: the classic ways a distributed job fails to start, each made on purpose.

`--scenario NAME` breaks one thing before `init_process_group` (or in the first collective),
so the failure and its message can be studied; `--scenario none` is the fixed run. Every
failure is bounded by LAB_PG_TIMEOUT, so a broken step ends in seconds instead of 30 minutes.
"""

import argparse
import os

import torch
import torch.distributed as dist

import labkit

# Multicast: the kernel refuses a TCP connection to it at once, so the "wrong host" sends nothing anywhere.
UNREACHABLE_ADDR = "224.0.0.1"
MISSING_INTERFACE = "nosuchif0"
SCENARIOS = ("none", "wrong-master-addr", "wrong-port", "world-size-mismatch", "wrong-ifname", "shape-mismatch")


def break_environment(scenario: str, rank: int) -> None:
    """Make the mistake the scenario names, the way it happens on a real cluster: one node's settings differ."""
    if scenario == "wrong-master-addr" and rank != 0:
        os.environ["MASTER_ADDR"] = UNREACHABLE_ADDR
    elif scenario == "wrong-port" and rank != 0:
        os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)
    elif scenario == "wrong-ifname":
        os.environ["GLOO_SOCKET_IFNAME"] = os.environ["NCCL_SOCKET_IFNAME"] = MISSING_INTERFACE


def first_lines(error: Exception, count: int = 4) -> str:
    """torch's message without the C++ frames that follow it."""
    lines = [line for line in str(error).splitlines() if line.strip() and not line.lstrip().startswith("frame #")]
    return "\n".join(lines[:count])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", choices=SCENARIOS, default="none")
    scenario = parser.parse_args().scenario

    rank = labkit.node_rank()
    # world-size-mismatch: every node was told there is one more node than there is.
    world_size = labkit.nnodes() + (scenario == "world-size-mismatch")
    break_environment(scenario, rank)
    labkit.log(rank, f"scenario {scenario}: rank {rank} of {world_size} via "
                     f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}, "
                     f"TORCH_DISTRIBUTED_DEBUG={os.environ.get('TORCH_DISTRIBUTED_DEBUG', 'OFF')}")
    try:
        backend, device = labkit.init(rank=rank, world_size=world_size)
        # shape-mismatch: rank r sends r + 2 numbers, so no two ranks agree on the all_reduce's shape.
        length = rank + 2 if scenario == "shape-mismatch" else 2
        values = torch.full((length,), float(rank + 1), device=device)
        dist.all_reduce(values)
    except Exception as error:  # the lesson is torch's own message: show it, then fail like any broken job
        labkit.fail(f"[rank {rank}] scenario {scenario} failed: {type(error).__name__}: {first_lines(error)}")
    labkit.log(rank, f"all_reduce gave {values.tolist()}")
    labkit.write_result(rank, scenario=scenario, backend=backend, world_size=dist.get_world_size(),
                        all_reduce=values.tolist())
    labkit.finish()


if __name__ == "__main__":
    main()
