"""Exercise 01: one process per node joins a process group through env://.

Each node runs this program once, whatever the processes per node (exercise 02 starts
several). The node's rank comes from NODE_RANK, the world size
from NNODES, and the meeting point from MASTER_ADDR/MASTER_PORT (node0): that is all
`init_process_group(init_method="env://")` needs. One all_reduce then proves the group works.
"""

import os
import socket

import torch
import torch.distributed as dist

import labkit


def owns_address(host: str) -> bool:
    """True when `host` names an address of this machine: only then can a socket be bound to it."""
    try:
        with socket.socket() as probe:
            probe.bind((socket.gethostbyname(host), 0))
        return True
    except OSError:
        return False


def main() -> None:
    rank = labkit.node_rank()
    world_size = labkit.nnodes()
    labkit.log(rank, f"joining a group of {world_size} via {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}")
    backend, device = labkit.init(rank=rank, world_size=world_size)
    # Every rank contributes rank + 1, so the sum is 1 + 2 + ... + world_size.
    total = torch.tensor([rank + 1], dtype=torch.int64, device=device)
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    labkit.log(rank, f"joined with backend {backend}; all_reduce sum = {total.item()}")
    master_addr = os.environ["MASTER_ADDR"]
    labkit.write_result(rank, world_size=dist.get_world_size(), backend=backend, all_reduce_sum=total.item(),
                        master_addr=master_addr, master_port=int(os.environ["MASTER_PORT"]),
                        master_addr_is_this_host=owns_address(master_addr))
    labkit.finish()


if __name__ == "__main__":
    main()
