import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 1000
D_MODEL = 32
DIVISIBLE_BY = 8


def padded_vocab(vocab, tp_size):
    multiple = DIVISIBLE_BY * tp_size
    return ((vocab + multiple - 1) // multiple) * multiple


class VocabParallelLM(nn.Module):
    def __init__(self, vocab, d_model, rank, world):
        super().__init__()
        self.rows = padded_vocab(vocab, world) // world
        self.start = rank * self.rows
        self.embed = nn.Parameter(torch.randn(self.rows, d_model) * 0.02)
        self.proj = nn.Linear(d_model, d_model)
        self.head = nn.Parameter(torch.randn(self.rows, d_model) * 0.02)

    def forward(self, ids):
        local = ids - self.start
        mask = (local < 0) | (local >= self.rows)
        h = F.embedding(local.clamp(0, self.rows - 1), self.embed)
        h = h.masked_fill(mask.unsqueeze(-1), 0.0)
        dist.all_reduce(h)
        h = torch.tanh(self.proj(h))
        return h @ self.head.t()


class ServingLM(nn.Module):
    def __init__(self, vocab, d_model):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, ids):
        return self.head(torch.tanh(self.proj(self.embed(ids))))


def gather_rows(t, world):
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0)


def main():
    timeout = int(os.environ.get("PG_TIMEOUT", "60"))
    dist.init_process_group("gloo", timeout=timedelta(seconds=timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(100 + rank)
    model = VocabParallelLM(VOCAB, D_MODEL, rank, world)
    torch.manual_seed(7)
    nn.init.normal_(model.proj.weight, std=0.1)
    nn.init.zeros_(model.proj.bias)

    with torch.no_grad():
        probe = torch.randint(0, VOCAB, (4, 12), generator=torch.Generator().manual_seed(3))
        local_logits = model(probe)
        tp_logits = gather_rows(local_logits.permute(2, 0, 1), world).permute(1, 2, 0)[..., :VOCAB]

        full = {
            "embed.weight": gather_rows(model.embed.data, world),
            "proj.weight": model.proj.weight.data.clone(),
            "proj.bias": model.proj.bias.data.clone(),
            "head.weight": gather_rows(model.head.data, world),
        }

    if rank == 0:
        print(f"tp={world} padded vocab {padded_vocab(VOCAB, world)}, shard rows {model.rows}", flush=True)
        serving = ServingLM(VOCAB, D_MODEL)
        serving.load_state_dict(full)
        with torch.no_grad():
            ref = serving(probe)
        err = (ref - tp_logits).abs().max().item()
        if err > 1e-4:
            raise RuntimeError(f"converted model disagrees with the tensor-parallel model: max err {err}")
        os.makedirs("export", exist_ok=True)
        torch.save(serving.state_dict(), "export/serving_lm.pt")
        print(f"saved export/serving_lm.pt (max err {err:.2e})", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
