"""Build the normalised adjacency of a citation graph from per-rank edge shards (CSR), then run one GCN layer."""
import os
import datetime
import torch
import torch.distributed as dist

NUM_NODES = 64
FEAT = 16


def setup():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    return dist.get_rank(), dist.get_world_size()


def load_edge_shard(rank, world):
    g = torch.Generator().manual_seed(1234)
    src = torch.randint(0, NUM_NODES, (400,), generator=g)
    dst = torch.randint(0, NUM_NODES, (400,), generator=g)
    keep = torch.arange(400) % world == rank
    return src[keep], dst[keep]


def local_adjacency(src, dst):
    idx = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    val = torch.ones(idx.shape[1])
    coo = torch.sparse_coo_tensor(idx, val, (NUM_NODES, NUM_NODES)).coalesce()
    return coo.to_sparse_csr()


def normalise(adj):
    adj = adj.to_dense() + torch.eye(NUM_NODES)
    deg = adj.sum(1)
    d = deg.pow(-0.5)
    return (d[:, None] * adj * d[None, :]).to_sparse_csr()


def main():
    rank, world = setup()
    src, dst = load_edge_shard(rank, world)
    adj = local_adjacency(src, dst)
    if world > 1:
        dist.all_reduce(adj, op=dist.ReduceOp.SUM)
    a_hat = normalise(adj)

    torch.manual_seed(0)
    x = torch.randn(NUM_NODES, FEAT)
    w = torch.randn(FEAT, 8) * 0.1
    h = torch.relu(a_hat @ (x @ w))
    print(f"rank {rank}: nnz={a_hat.values().numel()} out_norm={h.norm():.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
