import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 32
FFN = 64
NUM_EXPERTS = 8
TOP_K = 2
TOKENS = 96
STEPS = 20
AUX_COEF = 0.01


class LocalExperts(nn.Module):
    def __init__(self, n_local):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n_local, HIDDEN, FFN) * 0.05)
        self.w2 = nn.Parameter(torch.randn(n_local, FFN, HIDDEN) * 0.05)

    def forward(self, x, counts):
        outs = []
        for e, chunk in enumerate(torch.split(x, counts)):
            outs.append(F.gelu(chunk @ self.w1[e]) @ self.w2[e])
        return torch.cat(outs)


def dispatch_combine(x, expert_ids, experts, ws, n_local):
    order = torch.argsort(expert_ids, stable=True)
    routed = x[order]
    counts = torch.bincount(expert_ids, minlength=NUM_EXPERTS)
    if ws == 1:
        result = torch.empty_like(routed)
        result[order] = experts(routed, counts.tolist())
        return result
    recv_counts = torch.empty_like(counts)
    dist.all_to_all_single(recv_counts, counts)
    recv_counts = recv_counts.view(ws, n_local)
    send_splits = counts.tolist()
    recv_splits = recv_counts.sum(1).tolist()
    received = routed.new_empty(sum(recv_splits), HIDDEN)
    dist.all_to_all_single(received, routed.contiguous(), recv_splits, send_splits)
    chunks = torch.split(received, recv_splits)
    per_src = [torch.split(c, recv_counts[s].tolist()) for s, c in enumerate(chunks)]
    by_expert = [torch.cat([per_src[s][e] for s in range(ws)]) for e in range(n_local)]
    out = experts(torch.cat(by_expert), [b.shape[0] for b in by_expert])
    out_chunks = torch.split(out, [b.shape[0] for b in by_expert])
    back = []
    for s in range(ws):
        for e in range(n_local):
            start = int(recv_counts[:s, e].sum())
            back.append(out_chunks[e][start:start + int(recv_counts[s, e])])
    back = torch.cat(back)
    returned = torch.empty_like(routed)
    dist.all_to_all_single(returned, back.contiguous(), send_splits, recv_splits)
    result = torch.empty_like(returned)
    result[order] = returned
    return result


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, ws = dist.get_rank(), dist.get_world_size()
    assert NUM_EXPERTS % ws == 0
    n_local = NUM_EXPERTS // ws
    torch.manual_seed(0)
    router = nn.Linear(HIDDEN, NUM_EXPERTS, bias=False)
    torch.manual_seed(100 + rank)
    experts = LocalExperts(n_local)
    params = list(router.parameters()) + list(experts.parameters())
    opt = torch.optim.AdamW(params, lr=1e-3)
    gen = torch.Generator().manual_seed(1234 + rank)

    for step in range(STEPS):
        x = torch.randn(TOKENS, HIDDEN, generator=gen)
        target = torch.tanh(x.roll(1, dims=1))
        probs = F.softmax(router(x), dim=-1)
        topv, topi = probs.topk(TOP_K, dim=-1)
        topv = topv / topv.sum(-1, keepdim=True)
        flat_ids = topi.reshape(-1)
        flat_x = x.repeat_interleave(TOP_K, dim=0)
        y = dispatch_combine(flat_x, flat_ids, experts, ws, n_local)
        y = (y.view(TOKENS, TOP_K, HIDDEN) * topv.unsqueeze(-1)).sum(1)
        frac = torch.bincount(flat_ids, minlength=NUM_EXPERTS).float() / flat_ids.numel()
        aux = NUM_EXPERTS * (frac * probs.mean(0)).sum()
        loss = F.mse_loss(y, target) + AUX_COEF * aux
        opt.zero_grad()
        loss.backward()
        for p in router.parameters():
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)
        opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} aux {aux.item():.3f}", flush=True)

    if rank == 0:
        print("pretraining done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
