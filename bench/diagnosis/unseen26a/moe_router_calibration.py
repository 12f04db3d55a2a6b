import datetime
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

CONFIG = {"hidden": 48, "ffn": 96, "num_experts": 6, "top_k": 1, "batches": 8, "tokens": 128}


def build_experts(expert_ids, hidden, ffn):
    experts = nn.ModuleDict()
    for e in expert_ids:
        torch.manual_seed(1000 + e)
        experts[str(e)] = nn.Sequential(nn.Linear(hidden, ffn), nn.SiLU(), nn.Linear(ffn, hidden))
    return experts


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, ws = dist.get_rank(), dist.get_world_size()
    cfg = CONFIG
    E, H = cfg["num_experts"], cfg["hidden"]
    per_rank = max(1, E // ws)
    local_ids = list(range(rank * per_rank, min(E, (rank + 1) * per_rank)))
    experts = build_experts(local_ids, H, cfg["ffn"]).eval()
    torch.manual_seed(0)
    router = nn.Linear(H, E, bias=False).eval()
    gen = torch.Generator().manual_seed(77 + rank)

    load = torch.zeros(E)
    balance = []
    with torch.no_grad():
        for b in range(cfg["batches"]):
            x = torch.randn(cfg["tokens"], H, generator=gen)
            probs = F.softmax(router(x), dim=-1)
            gate, eid = probs.max(dim=-1)
            load += torch.bincount(eid, minlength=E).float()
            frac = torch.bincount(eid, minlength=E).float() / eid.numel()
            balance.append(float(E * (frac * probs.mean(0)).sum()))

            owner = eid // per_rank
            order = torch.argsort(owner, stable=True)
            send_counts = torch.zeros(ws, dtype=torch.long).index_add_(0, owner, torch.ones_like(owner))
            recv_counts = torch.empty_like(send_counts)
            dist.all_to_all_single(recv_counts, send_counts)
            send_x = torch.cat([x[order], eid[order].unsqueeze(1).float()], dim=1)
            recv_x = send_x.new_empty(int(recv_counts.sum()), H + 1)
            dist.all_to_all_single(recv_x, send_x, recv_counts.tolist(), send_counts.tolist())
            tokens, ids = recv_x[:, :H], recv_x[:, H].long()
            out = torch.zeros_like(tokens)
            for e in local_ids:
                mask = ids == e
                if mask.any():
                    out[mask] = experts[str(e)](tokens[mask])
            back = torch.empty(int(send_counts.sum()), H)
            dist.all_to_all_single(back, out, send_counts.tolist(), recv_counts.tolist())
            y = torch.empty_like(back)
            y[order] = back
            y = y * gate.unsqueeze(1)
            if rank == 0:
                print(f"batch {b} out_norm {y.norm():.3f} balance {balance[-1]:.3f}", flush=True)

    dist.all_reduce(load)
    stats = torch.tensor([sum(balance) / len(balance)])
    dist.all_reduce(stats, op=dist.ReduceOp.AVG)
    if rank == 0:
        report = {"load": (load / load.sum()).tolist(), "balance_loss": stats.item(), "world_size": ws}
        with open("router_calibration.json", "w") as f:
            json.dump(report, f, indent=1)
        print(json.dumps(report), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
