import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

N_DENSE = 13
N_CAT_FIELDS = 6
CAT_CARDINALITY = 500
EMB_DIM = 8
HIDDEN = 64
BATCH = 128
STEPS = 30


class CTRModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(CAT_CARDINALITY, EMB_DIM)
        self.dense_norm = nn.LayerNorm(N_DENSE)
        self.mlp = nn.Sequential(
            nn.LazyLinear(HIDDEN), nn.ReLU(),
            nn.LazyLinear(HIDDEN // 2), nn.ReLU(),
            nn.Linear(HIDDEN // 2, 1),
        )

    def forward(self, dense, cats):
        x = torch.cat([self.dense_norm(dense), self.emb(cats).flatten(1)], dim=1)
        return self.mlp(x).squeeze(-1)


def make_shard(rank, n=4096):
    g = torch.Generator().manual_seed(1234 + rank)
    dense = torch.randn(n, N_DENSE, generator=g)
    cats = torch.randint(0, CAT_CARDINALITY, (n, N_CAT_FIELDS), generator=g)
    logit = dense[:, :3].sum(1) + (cats[:, 0] % 7 == 0).float() * 2.0 - 1.0
    clicks = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    return dense, cats, clicks


def log_model_summary(model, example):
    macs = []

    def count(mod, inp, out):
        if isinstance(mod, nn.Linear):
            macs.append(inp[0].shape[0] * mod.in_features * mod.out_features)

    hooks = [m.register_forward_hook(count) for m in model.modules()]
    with torch.no_grad():
        model(*example)
    for h in hooks:
        h.remove()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e3:.1f}k params, {sum(macs) / example[0].shape[0] / 1e3:.1f}k MACs/sample",
          flush=True)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    dense, cats, clicks = make_shard(rank)
    model = CTRModel()
    if rank == 0:
        log_model_summary(model, (dense[:2], cats[:2]))

    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3, weight_decay=1e-4)

    t0 = time.time()
    for step in range(STEPS):
        idx = torch.randint(0, dense.shape[0], (BATCH,))
        logits = ddp(dense[idx], cats[idx])
        loss = F.binary_cross_entropy_with_logits(logits, clicks[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 10 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    stats = torch.tensor([loss.item(), 1.0])
    dist.all_reduce(stats)
    if rank == 0:
        print(f"done in {time.time() - t0:.1f}s, mean final loss {stats[0] / stats[1]:.4f} over {world} ranks",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
