"""Every rank writes its predictions to the shared run folder; rank 0 merges them into one file."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ["LOCAL_RANK"])
    os.makedirs("preds", exist_ok=True)
    gen = torch.Generator().manual_seed(rank)
    preds = torch.randint(0, 10, (500,), generator=gen)
    torch.save({"rank": rank, "preds": preds}, f"preds/part-{local_rank}.pt")
    dist.barrier()
    if rank == 0:
        parts = [torch.load(f"preds/part-{r}.pt") for r in range(world)]
        merged = torch.cat([p["preds"] for p in parts])
        torch.save(merged, "preds/all.pt")
        print(f"merged {len(merged)} predictions from {world} ranks", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
