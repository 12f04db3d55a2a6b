"""Language-model-ish training with DDP: the corpus was pre-split into one part file per rank."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB = 200
SEQ = 16
BATCH = 32
# records per part file, as written by the preprocessing job (part-00000 ... part-00003)
PART_RECORDS = [512, 512, 512, 448]


def read_part(index):
    g = torch.Generator().manual_seed(index)
    return torch.randint(0, VOCAB, (PART_RECORDS[index % len(PART_RECORDS)], SEQ + 1), generator=g)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, tokens):
        h, _ = self.rnn(self.embed(tokens))
        return self.out(h)


def main():
    timeout = datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "10")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    records = read_part(rank)
    print(f"rank {rank}: part-{rank:05d} has {len(records)} records", flush=True)
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    total = torch.zeros(2)
    for i in range(0, len(records), BATCH):
        batch = records[i:i + BATCH]
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += torch.tensor([loss.item() * len(batch), len(batch)])
    dist.barrier()
    dist.all_reduce(total)
    if rank == 0:
        print(f"epoch done: mean loss {total[0] / total[1]:.4f} over {int(total[1])} records", flush=True)
        torch.save(model.module.state_dict(), "tinylm.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
