import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

FEAT, EMB, CLASSES = 32, 16, 10
N_MEMORY = 3001
TOPK = 8
STEPS = 25


def synthetic_corpus(n, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(CLASSES, FEAT, generator=torch.Generator().manual_seed(7)) * 2.0
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    feats = centers[labels] + torch.randn(n, FEAT, generator=g)
    return feats, labels


class KNNAugmentedClassifier(nn.Module):
    def __init__(self, mem_feats, mem_labels):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(FEAT, 64), nn.GELU(), nn.Linear(64, EMB))
        self.head = nn.Linear(EMB, CLASSES)
        self.mix = nn.Parameter(torch.tensor(0.5))
        self.register_buffer("mem_feats", mem_feats)
        self.register_buffer("mem_labels", mem_labels)

    def knn_logits(self, q):
        with torch.no_grad():
            keys = F.normalize(self.encoder(self.mem_feats), dim=-1)
        sims = F.normalize(q, dim=-1) @ keys.T
        top, idx = sims.topk(TOPK, dim=-1)
        votes = F.one_hot(self.mem_labels[idx], CLASSES).float()
        return (top.softmax(-1).unsqueeze(-1) * votes).sum(1)

    def forward(self, x):
        q = self.encoder(x)
        return self.head(q) + self.mix * self.knn_logits(q).log1p()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    mem_feats, mem_labels = synthetic_corpus(N_MEMORY, seed=11)
    my_feats = torch.tensor_split(mem_feats, world)[rank].clone()
    my_labels = torch.tensor_split(mem_labels, world)[rank].clone()
    print(f"rank {rank}: memory shard of {len(my_labels)} entries", flush=True)

    train_x, train_y = synthetic_corpus(2048, seed=100 + rank)
    model = DDP(KNNAugmentedClassifier(my_feats, my_labels))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    for step in range(STEPS):
        idx = torch.randint(0, len(train_y), (64,))
        loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.3f}", flush=True)

    model.eval()
    val_x, val_y = synthetic_corpus(512, seed=999)
    with torch.no_grad():
        correct = (model(val_x).argmax(-1) == val_y).sum().float()
    dist.all_reduce(correct)
    if rank == 0:
        print(f"val acc (mean over ranks) {correct.item() / (512 * world):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
