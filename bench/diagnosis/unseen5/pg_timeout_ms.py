"""Embedding table trained on rank 0 offline, broadcast to every worker at start-up."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def pg_timeout():
    # PG_TIMEOUT is given in the job config; keep collectives from hanging forever
    return timedelta(milliseconds=float(os.environ.get("PG_TIMEOUT", "10")))


def main():
    dist.init_process_group("gloo", timeout=pg_timeout())
    rank = dist.get_rank()
    table = torch.empty(250_000, 64)  # 64 MB
    if rank == 0:
        torch.manual_seed(0)
        table.normal_()
    dist.broadcast(table, src=0)
    norms = table.norm(dim=1)
    print(f"rank {rank}: table ready, mean norm {norms.mean():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
