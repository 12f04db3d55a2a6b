import datetime
import os

import torch
import torch.distributed as dist

SHAPES = {"q_proj": (256, 256), "k_proj": (64, 256), "v_proj": (64, 256), "o_proj": (256, 256)}
R, ALPHA = 16, 32


def quantize_fp8(w):
    scale = w.abs().max().clamp(min=1e-8) / 448.0
    return (w / scale).to(torch.float8_e4m3fn), scale.reshape(1)


def dequantize(q, scale):
    return q.to(torch.float32) * scale


def load_base_and_adapter(seed):
    g = torch.Generator().manual_seed(seed)
    base, adapter = {}, {}
    for name, (out_f, in_f) in SHAPES.items():
        base[name] = quantize_fp8(torch.randn(out_f, in_f, generator=g) * 0.02)
        adapter[name] = (torch.randn(R, in_f, generator=g) * 0.01, torch.randn(out_f, R, generator=g) * 0.01)
    return base, adapter


def merge(base, adapter):
    merged = {}
    for name, (q, scale) in base.items():
        a, b = adapter[name]
        w = dequantize(q, scale) + (b @ a) * (ALPHA / R)
        merged[name] = quantize_fp8(w)
    return merged


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        base, adapter = load_base_and_adapter(seed=7)
        merged = merge(base, adapter)
    else:
        merged = {n: (torch.empty(s, dtype=torch.float8_e4m3fn), torch.empty(1)) for n, s in SHAPES.items()}
    if world > 1:
        for name in sorted(merged):
            q, scale = merged[name]
            dist.broadcast(q, src=0)
            dist.broadcast(scale, src=0)
    x = torch.randn(4, 256, generator=torch.Generator().manual_seed(3))
    q_out = x @ dequantize(*merged["q_proj"]).t()
    check = q_out.abs().mean().reshape(1)
    ref = check.clone()
    dist.broadcast(ref, src=0)
    ok = torch.allclose(check, ref)
    print(f"rank {rank}: merged {len(merged)} projections, serve-check {'ok' if ok else 'MISMATCH'}", flush=True)
    if rank == 0:
        torch.save({n: (q.view(torch.uint8), s) for n, (q, s) in merged.items()}, "merged_fp8.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
