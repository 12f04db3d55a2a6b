"""Keyword-spotting trainer on a pre-bucketed feature store (clips grouped by duration)."""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Subset

N_MELS, N_KEYWORDS, BATCH = 40, 12, 4
BUCKET_FRAMES = [48, 64, 80, 96, 112, 128]
CLIPS_PER_BUCKET = 12


class BucketedFeatureStore(Dataset):
    """Clips are stored bucket by bucket; every clip in a bucket was trimmed/padded to the bucket's frame count."""

    def __init__(self, seed=3):
        g = torch.Generator().manual_seed(seed)
        self.records = []
        for frames in BUCKET_FRAMES:
            for _ in range(CLIPS_PER_BUCKET):
                feats = torch.randn(frames, N_MELS, generator=g)
                label = int(torch.randint(0, N_KEYWORDS, (1,), generator=g))
                self.records.append((feats, label))

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        feats, label = self.records[i]
        return feats, label


class Spotter(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(N_MELS, 64, 5, padding=2), nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2), nn.ReLU(),
        )
        self.head = nn.Linear(64, N_KEYWORDS)

    def forward(self, x):
        h = self.conv(x.transpose(1, 2))
        return self.head(h.mean(dim=2))


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    store = BucketedFeatureStore()
    shard = Subset(store, list(range(rank, len(store), world)))
    loader = DataLoader(shard, batch_size=BATCH, shuffle=False, drop_last=True)
    model = DDP(Spotter())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        seen, correct, total_loss = 0, 0, 0.0
        for feats, labels in loader:
            logits = model(feats)
            loss = loss_fn(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total_loss += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
        stats = torch.tensor([total_loss, correct, seen], dtype=torch.float64)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch} loss {stats[0] / stats[2]:.4f} acc {stats[1] / stats[2]:.3f}", flush=True)
    if rank == 0:
        torch.save(model.module.state_dict(), "spotter.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
