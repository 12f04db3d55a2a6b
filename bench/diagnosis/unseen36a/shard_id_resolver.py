import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM = 24


def setup():
    timeout = timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def load_shard(rank):
    g = torch.Generator().manual_seed(400 + rank)
    rows = 1000 + 113 * rank
    return F.normalize(torch.randn(rows, DIM, generator=g), dim=1)


def shard_layout(n_local, world):
    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([n_local], dtype=torch.int64))
    sizes = torch.cat(sizes)
    ends = torch.cumsum(sizes, dim=0)
    starts = ends - sizes
    return starts, ends


def resolve(global_ids, ends):
    owner = torch.bucketize(global_ids, ends)
    return owner


def fetch(global_ids, shard, rank, world, starts, ends):
    owner = resolve(global_ids, ends)
    out = torch.zeros(len(global_ids), DIM)
    mine = owner == rank
    local = global_ids[mine] - starts[rank]
    out[mine] = shard[local]
    dist.all_reduce(out)
    return out, owner


def probe_ids(starts, ends):
    probes = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        probes += [s, s + 1, (s + e) // 2, e - 1]
    return torch.tensor(probes, dtype=torch.int64)


def main():
    rank, world = setup()
    shard = load_shard(rank)
    starts, ends = shard_layout(shard.shape[0], world)
    total = int(ends[-1])

    probes = probe_ids(starts, ends)
    vecs, owner = fetch(probes, shard, rank, world, starts, ends)
    sims = (vecs @ vecs.T).diagonal()
    if not torch.allclose(sims, torch.ones_like(sims), atol=1e-4):
        raise RuntimeError(f"resolver self-test failed on rank {rank}: owners {owner.tolist()}")

    g = torch.Generator().manual_seed(8)
    batch = torch.randint(0, total, (256,), generator=g)
    vecs, _ = fetch(batch, shard, rank, world, starts, ends)
    norm_sum = vecs.norm(dim=1).sum().reshape(1)
    dist.all_reduce(norm_sum)
    if rank == 0:
        print(f"resolved {len(batch)} ids over {world} shards ({total} rows); norm sum {norm_sum.item() / world:.2f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
