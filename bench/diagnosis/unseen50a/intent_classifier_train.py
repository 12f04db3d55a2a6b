import os
import datetime

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

INTENTS = ["greet", "order", "cancel", "refund", "track", "complain", "other"]
VOCAB = 300
SEQ = 16


class ShardedIntentSet(Dataset):
    """Each rank keeps its own shard; every rank reports the same epoch length."""

    def __init__(self, rank, world, n_total=230, seed=3):
        g = torch.Generator().manual_seed(seed)
        y = torch.randint(0, len(INTENTS), (n_total,), generator=g)
        x = torch.randint(0, VOCAB, (n_total, SEQ), generator=g)
        x[:, 0] = y * 40 + torch.randint(0, 40, (n_total,), generator=g)
        self.x, self.y = x[rank::world], y[rank::world]

    def __len__(self):
        n = torch.tensor([len(self.y)], dtype=torch.int64)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(n, op=dist.ReduceOp.MIN)
        return int(n.item())

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def class_counts(self):
        return torch.bincount(self.y, minlength=len(INTENTS))


class IntentModel(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim)
        self.out = nn.Linear(dim, len(INTENTS))

    def forward(self, x):
        return self.out(self.emb(x))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    ds = ShardedIntentSet(rank, world)
    counts = ds.class_counts().double()
    dist.all_reduce(counts)
    weights = (counts.sum() / (len(INTENTS) * counts.clamp_min(1))).float()

    loader = DataLoader(ds, batch_size=16, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(rank))
    model = DDP(IntentModel())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = nn.CrossEntropyLoss(weight=weights)

    if rank == 0:
        print(f"class weights: {[round(w, 2) for w in weights.tolist()]}", flush=True)
        print(f"{len(ds)} examples per rank, {len(loader)} steps per epoch", flush=True)

    for epoch in range(3):
        total = torch.zeros(2, dtype=torch.float64)
        for xb, yb in loader:
            loss = loss_fn(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(yb), len(yb)], dtype=torch.float64)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: weighted loss {total[0] / total[1]:.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
