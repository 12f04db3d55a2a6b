import os
import datetime
import numpy as np
import torch
import torch.nn as nn
import torch.distributed as dist

PER_RANK = 400
FEAT = 8
BUDGET = 32


def load_shard(rank):
    rng = np.random.default_rng(100 + rank)
    centre = 0.0 if rank == 0 else 6.0
    x = rng.normal(centre, 1.0, size=(PER_RANK, FEAT)).astype(np.float32)
    return torch.from_numpy(x), np.arange(rank * PER_RANK, (rank + 1) * PER_RANK)


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(FEAT, 2)
        with torch.no_grad():
            self.lin.weight.fill_(0.0)
            self.lin.weight[1, :] = 1.0
            self.lin.bias.zero_()

    def forward(self, x):
        return self.lin(x)


def margin(model, x):
    with torch.no_grad():
        p = model(x).softmax(-1)
        top2 = p.topk(2, dim=-1).values
        return 1.0 - (top2[:, 0] - top2[:, 1])


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    x, gids = load_shard(rank)
    model = Scorer()
    u = margin(model, x)

    everything = [torch.zeros(len(u)) for _ in range(world)]
    dist.all_gather(everything, u)
    pooled = torch.cat(everything)
    threshold = pooled.topk(BUDGET).values[-1].item()

    mine = np.flatnonzero(u.numpy() >= threshold)
    selected_local = gids[mine].tolist()
    gathered = [None] * world
    dist.all_gather_object(gathered, selected_local)

    if rank == 0:
        chosen = torch.cat([torch.tensor(r_ids) for r_ids in gathered])
        label_mask = torch.zeros(PER_RANK * world, dtype=torch.bool)
        label_mask[chosen] = True
        print(f"selected {int(label_mask.sum())} of {label_mask.numel()} items "
              f"(threshold {threshold:.4f})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
