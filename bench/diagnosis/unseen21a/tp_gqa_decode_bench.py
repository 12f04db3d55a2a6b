"""Benchmark of a tensor-parallel grouped-query attention block for serving: q/k/v projections are
split column-wise across ranks, the output projection row-wise, and partial outputs are summed."""
import datetime
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

DIM, N_HEADS, N_KV_HEADS = 256, 16, 2
HEAD_DIM = DIM // N_HEADS
BATCH, PROMPT, NEW_TOKENS = 4, 64, 16


def column_shard(weight, rank, world):
    return weight.chunk(world, dim=0)[rank].contiguous()


def row_shard(weight, rank, world):
    return weight.chunk(world, dim=1)[rank].contiguous()


class TPAttention:
    def __init__(self, wq, wk, wv, wo, rank, world):
        self.wq, self.wk, self.wv = (column_shard(w, rank, world) for w in (wq, wk, wv))
        self.wo = row_shard(wo, rank, world)
        self.k_cache = self.v_cache = None

    def __call__(self, x):
        b, t, _ = x.shape
        q = F.linear(x, self.wq).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        k = F.linear(x, self.wk).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        v = F.linear(x, self.wv).view(b, t, -1, HEAD_DIM).transpose(1, 2)
        if self.k_cache is not None:
            k, v = torch.cat([self.k_cache, k], dim=2), torch.cat([self.v_cache, v], dim=2)
        self.k_cache, self.v_cache = k, v
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        out = F.linear(attn.transpose(1, 2).reshape(b, t, -1), self.wo)
        dist.all_reduce(out)
        return out


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    wq = torch.randn(N_HEADS * HEAD_DIM, DIM) * DIM ** -0.5
    wk = torch.randn(N_KV_HEADS * HEAD_DIM, DIM) * DIM ** -0.5
    wv = torch.randn(N_KV_HEADS * HEAD_DIM, DIM) * DIM ** -0.5
    wo = torch.randn(DIM, N_HEADS * HEAD_DIM) * DIM ** -0.5
    layer = TPAttention(wq, wk, wv, wo, rank, world)
    prompt = torch.randn(BATCH, PROMPT, DIM)
    with torch.no_grad():
        t0 = time.perf_counter()
        h = layer(prompt)
        prefill_s = time.perf_counter() - t0
        x = h[:, -1:]
        t0 = time.perf_counter()
        for _ in range(NEW_TOKENS):
            x = layer(x)
        decode_s = time.perf_counter() - t0
    stats = torch.tensor([prefill_s, decode_s])
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    if rank == 0:
        result = {"tp": world, "prefill_ms": 1e3 * stats[0].item(),
                  "decode_ms_per_token": 1e3 * stats[1].item() / NEW_TOKENS}
        with open(f"tp{world}_attention_bench.json", "w") as f:
            json.dump(result, f)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
