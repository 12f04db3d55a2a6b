"""Text classifier trainer adapted from a GPU tutorial to CPU nodes."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class BagOfWords(nn.Module):
    def __init__(self, vocab=500, dim=32, classes=4):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, tokens):
        return self.out(self.embed(tokens))


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "10"))))
    rank = dist.get_rank()
    device = torch.device("cpu")
    model = BagOfWords().to(device)
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(20):
        tokens, labels = torch.randint(0, 500, (16, 20)), torch.randint(0, 4, (16,))
        loss = nn.functional.cross_entropy(model(tokens), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print("loss", loss.item(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
