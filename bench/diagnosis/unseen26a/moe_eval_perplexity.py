import datetime
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 400
HIDDEN = 32
NUM_EXPERTS = 4
EVAL_CAPACITY_FACTOR = 1.0
BATCHES = 10
TOKENS = 256


class ExpertBank(nn.Module):
    def __init__(self, expert_ids):
        super().__init__()
        self.ids = list(expert_ids)
        self.ffn = nn.ModuleList()
        for e in self.ids:
            torch.manual_seed(500 + e)
            self.ffn.append(nn.Sequential(nn.Linear(HIDDEN, 64), nn.GELU(), nn.Linear(64, HIDDEN)))

    def forward(self, x, eid):
        out = torch.zeros_like(x)
        for e, f in zip(self.ids, self.ffn):
            m = eid == e
            if m.any():
                out[m] = f(x[m])
        return out


def moe_layer(x, router, bank, ws):
    probs = F.softmax(router(x), dim=-1)
    gate, eid = probs.max(-1)
    if ws == 1:
        return bank(x, eid) * gate.unsqueeze(1)
    n_local = NUM_EXPERTS // ws
    owner = eid // n_local
    order = torch.argsort(owner, stable=True)
    send_counts = torch.bincount(owner, minlength=ws)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts)
    payload = torch.cat([x[order], eid[order].unsqueeze(1).float()], 1)
    recv = payload.new_empty(int(recv_counts.sum()), HIDDEN + 1)
    dist.all_to_all_single(recv, payload, recv_counts.tolist(), send_counts.tolist())
    tokens, rid = recv[:, :HIDDEN], recv[:, HIDDEN].long()

    capacity = math.ceil(EVAL_CAPACITY_FACTOR * x.shape[0] * ws / NUM_EXPERTS)
    keep = torch.zeros_like(rid, dtype=torch.bool)
    for e in bank.ids:
        idx = (rid == e).nonzero().squeeze(1)
        keep[idx[:capacity]] = True
    out = bank(tokens[keep], rid[keep])

    back = x.new_empty(x.shape[0], HIDDEN)
    dist.all_to_all_single(back, out, send_counts.tolist(), recv_counts.tolist())
    y = torch.empty_like(back)
    y[order] = back
    return y * gate.unsqueeze(1)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, ws = dist.get_rank(), dist.get_world_size()
    n_local = NUM_EXPERTS // ws
    torch.manual_seed(0)
    embed = nn.Embedding(VOCAB, HIDDEN)
    router = nn.Linear(HIDDEN, NUM_EXPERTS, bias=False)
    head = nn.Linear(HIDDEN, VOCAB)
    bank = ExpertBank(range(rank * n_local, (rank + 1) * n_local))
    gen = torch.Generator().manual_seed(31 + rank)

    total = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for b in range(BATCHES):
            ids = torch.randint(0, VOCAB, (TOKENS + 1,), generator=gen)
            h = embed(ids[:-1])
            h = h + moe_layer(h, router, bank, ws)
            nll = F.cross_entropy(head(h), ids[1:], reduction="sum")
            total += torch.tensor([nll.item(), TOKENS], dtype=torch.float64)
            if rank == 0:
                print(f"batch {b} nll/token {nll.item() / TOKENS:.3f}", flush=True)

    dist.all_reduce(total)
    if rank == 0:
        print(f"eval perplexity {math.exp(total[0] / total[1]):.2f} over {int(total[1])} tokens", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
