"""Train a sentiment classifier with DDP from a shard file of serialized records.

A few records in the crawl are damaged; rather than stop a long run, the dataset logs and skips them.
"""
import datetime
import io
import os
import pickle

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

VOCAB, MAXLEN = 500, 24


def write_records(path, n=400):
    """The crawl as it sits on the shared disk: one pickled (tokens, label) per record; record 301 was cut short."""
    g = torch.Generator().manual_seed(3)
    records = []
    for i in range(n):
        label = i % 2
        tokens = torch.randint(0, VOCAB // 2, (MAXLEN,), generator=g) + label * (VOCAB // 2)
        blob = pickle.dumps((tokens.tolist(), label))
        records.append(blob[: len(blob) // 2] if i == 301 else blob)
    with open(path, "wb") as f:
        pickle.dump(records, f)


class Records(Dataset):
    def __init__(self, path):
        with open(path, "rb") as f:
            self.records = pickle.load(f)

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        try:
            tokens, label = pickle.load(io.BytesIO(self.records[i]))
        except Exception as error:  # damaged record: skip it
            print(f"warning: skipping record {i}: {error!r}", flush=True)
            return None
        return torch.tensor(tokens), label


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 32)
        self.fc = nn.Linear(32, 2)

    def forward(self, tokens):
        return self.fc(self.embed(tokens))


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    path = os.path.join(os.getcwd(), "reviews.records")
    if rank == 0:
        write_records(path)
    dist.barrier()
    data = Records(path)
    torch.manual_seed(0)
    model = DDP(BagOfWords())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=2)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for step, (tokens, labels) in enumerate(loader):
            loss = F.cross_entropy(model(tokens), labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"rank {rank} epoch {epoch} loss {loss.item():.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
