"""Hierarchical averaging: average within each node first, then across the node leaders."""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    per_node = int(os.environ["LOCAL_WORLD_SIZE"])
    nodes = world // per_node
    node_groups = [dist.new_group(list(range(n * per_node, (n + 1) * per_node))) for n in range(nodes)]
    leaders = dist.new_group([n * per_node for n in range(nodes)])
    my_node_group = node_groups[local_rank]

    value = torch.full((4,), float(rank + 1))
    dist.all_reduce(value, group=my_node_group)
    value /= per_node
    node = rank // per_node
    expected_node = sum(range(node * per_node + 1, (node + 1) * per_node + 1)) / per_node
    if abs(value[0].item() - expected_node) > 1e-6:
        print(f"rank {rank}: node average is {value[0].item()}, expected {expected_node}", file=sys.stderr, flush=True)
        sys.exit(1)
    if local_rank == 0:
        dist.all_reduce(value, group=leaders)
        value /= nodes
    dist.broadcast(value, src=node * per_node, group=my_node_group)
    print(f"rank {rank}: global average {value[0].item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
