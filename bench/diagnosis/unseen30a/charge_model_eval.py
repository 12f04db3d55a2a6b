import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

NUM_MOLS = 24
ELEMENTS = 10
HIDDEN = 32


def make_molecules():
    g = torch.Generator().manual_seed(7)
    mols = []
    for m in range(NUM_MOLS):
        n = 3 + m % 5
        z = torch.randint(1, ELEMENTS, (n,), generator=g)
        pos = torch.randn(n, 3, generator=g) * 1.5
        charge = torch.randn(n, generator=g) * 0.3
        mols.append({"z": z, "pos": pos, "q": charge - charge.mean()})
    return mols


def radius_edges(pos, cutoff=2.5):
    d = torch.cdist(pos, pos)
    mask = (d < cutoff) & ~torch.eye(len(pos), dtype=torch.bool)
    return mask.nonzero().t(), d[mask]


class ChargeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(ELEMENTS, HIDDEN)
        self.msg = nn.Linear(HIDDEN + 1, HIDDEN)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, z, pos):
        h = self.embed(z)
        edge_index, dist_ij = radius_edges(pos)
        for _ in range(2):
            m = torch.tanh(self.msg(torch.cat([h[edge_index[0]], dist_ij[:, None]], 1)))
            agg = torch.zeros_like(h).index_add_(0, edge_index[1], m)
            h = h + agg
        q = self.head(h).squeeze(-1)
        return q - q.mean()


@torch.no_grad()
def evaluate(model, mols):
    preds, targets = [], []
    for mol in mols:
        preds.append(model(mol["z"], mol["pos"]))
        targets.append(mol["q"])
    return torch.cat(preds), torch.cat(targets)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = ChargeNet().eval()
    mols = make_molecules()
    shard = mols[rank::world]
    pred, target = evaluate(model, shard)
    print(f"rank {rank}: {len(shard)} molecules, {pred.numel()} atoms", flush=True)

    gathered = [None] * world
    dist.all_gather_object(gathered, (pred, target))
    if rank == 0:
        all_pred = torch.stack([p for p, _ in gathered])
        all_tgt = torch.stack([t for _, t in gathered])
        mae = (all_pred - all_tgt).abs().mean().item()
        rmse = (all_pred - all_tgt).pow(2).mean().sqrt().item()
        print(f"atoms {all_pred.numel()} charge MAE {mae:.4f} RMSE {rmse:.4f}", flush=True)
        with open("charge_eval.txt", "w") as f:
            f.write(f"mae={mae:.6f}\nrmse={rmse:.6f}\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
