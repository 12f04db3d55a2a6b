import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

VOCAB = 50


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h[:, -1])


def read_requests():
    g = torch.Generator().manual_seed(5)
    reqs = [torch.randint(0, VOCAB, (8,), generator=g).tolist() for _ in range(24)]
    params = {"max_new_tokens": 6, "temperature": 0.0}
    return reqs, params


def greedy(model, prompts, max_new):
    ids = torch.tensor(prompts)
    with torch.no_grad():
        for _ in range(max_new):
            nxt = model(ids).argmax(-1, keepdim=True)
            ids = torch.cat([ids, nxt], dim=1)
    return ids[:, -max_new:].tolist()


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = TinyLM().eval()
    batch = read_requests() if rank == 0 else (None, None)
    dist.broadcast_object_list(batch, src=0)
    requests, params = batch
    mine = requests[rank::world]
    completions = greedy(model, mine, params["max_new_tokens"])
    gathered = [None] * world
    dist.all_gather_object(gathered, completions)
    if rank == 0:
        served = sum(len(c) for c in gathered)
        print(f"served {served}/{len(requests)} requests", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
