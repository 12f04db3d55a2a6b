import os
import datetime
import torch
import torch.nn as nn
import torch.distributed as dist

GLOBAL_BATCH = 8
HIDDEN = 32
ELEMENTS = 12


def make_dataset():
    g = torch.Generator().manual_seed(11)
    mols = []
    for i in range(32):
        n = 1 if i % 8 == 0 else int(torch.randint(2, 9, (1,), generator=g))
        z = torch.randint(1, ELEMENTS, (n,), generator=g)
        bonds = [(a, a + 1) for a in range(n - 1)]
        ei = torch.tensor(bonds + [(b, a) for a, b in bonds], dtype=torch.long).t().reshape(2, -1)
        energy = -0.5 * n + 0.1 * torch.randn(1, generator=g).item()
        mols.append({"z": z, "edge_index": ei, "y": energy})
    mols.sort(key=lambda m: len(m["z"]))
    return mols


def collate(mols):
    zs, eis, batch, ys, offset = [], [], [], [], 0
    for gi, m in enumerate(mols):
        zs.append(m["z"])
        eis.append(m["edge_index"] + offset)
        batch.append(torch.full((len(m["z"]),), gi, dtype=torch.long))
        ys.append(m["y"])
        offset += len(m["z"])
    z, edge_index = torch.cat(zs), torch.cat(eis, 1)
    if int(edge_index.max()) >= len(z):
        raise ValueError("edge_index refers to a missing atom")
    return z, edge_index, torch.cat(batch), torch.tensor(ys)


class MPNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(ELEMENTS, HIDDEN)
        self.msg = nn.Linear(2 * HIDDEN, HIDDEN)
        self.readout = nn.Sequential(nn.Linear(HIDDEN, HIDDEN), nn.SiLU(), nn.Linear(HIDDEN, 1))

    def forward(self, z, edge_index, batch, num_graphs):
        h = self.embed(z)
        for _ in range(3):
            m = torch.relu(self.msg(torch.cat([h[edge_index[0]], h[edge_index[1]]], 1)))
            h = h + torch.zeros_like(h).index_add_(0, edge_index[1], m)
        atom_e = self.readout(h).squeeze(-1)
        return torch.zeros(num_graphs).index_add_(0, batch, atom_e)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    data = make_dataset()
    per_rank = len(data) // world
    shard = data[rank * per_rank:(rank + 1) * per_rank]
    bs = GLOBAL_BATCH // world
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(MPNN())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(3):
        for step in range(0, len(shard), bs):
            z, ei, batch, y = collate(shard[step:step + bs])
            pred = model(z, ei, batch, len(y))
            loss = nn.functional.mse_loss(pred, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
