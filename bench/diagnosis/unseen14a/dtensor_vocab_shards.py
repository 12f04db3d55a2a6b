"""Row-sharded embedding table: every rank owns a contiguous block of the vocabulary (torch.tensor_split of the
1003 rows), trains its own rows on the tokens it owns, and at the end the table is reassembled with DTensor
(from_local with Shard(0), then full_tensor()) so rank 0 can write the full embedding matrix."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Shard

VOCAB = 1003
DIM = 16


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("vocab",))

    rows = torch.tensor_split(torch.arange(VOCAB), world)[rank]
    first, last = int(rows[0]), int(rows[-1]) + 1
    torch.manual_seed(rank)
    local_table = torch.nn.Parameter(0.02 * torch.randn(last - first, DIM))
    optimizer = torch.optim.SGD([local_table], lr=0.5)

    corpus = torch.randint(0, VOCAB, (4000,), generator=torch.Generator().manual_seed(7))
    target = torch.linspace(-1, 1, DIM)
    for step in range(20):
        batch = corpus[step * 200:(step + 1) * 200]
        mine = batch[(batch >= first) & (batch < last)] - first
        loss = ((local_table[mine] - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0 and step % 5 == 0:
            print(f"step {step}: loss {total.item():.4f}", flush=True)

    sharded = DTensor.from_local(local_table.detach(), mesh, [Shard(0)])
    full = sharded.full_tensor()
    if rank == 0:
        torch.save(full, "/tmp/embedding_table.pt")
        print(f"saved embedding table {tuple(full.shape)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
