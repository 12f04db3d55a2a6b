"""Causal LM fine-tuning with FSDP2 on CPU nodes (torchrun, 1 process per node), loss normalised by global tokens.

Sequences are packed with padding, so ranks see different numbers of real tokens per step. Averaging per-rank mean
losses would weight a token on a padded-heavy rank more than one on a full rank; instead every rank sums its token
losses and FSDP divides the reduced gradients by the number of real tokens across all ranks (the trick used for
token-level normalisation in large-scale LM training).
"""
import os
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

VOCAB, DIM, SEQ, BATCH, PAD = 512, 64, 48, 8, 0


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(DIM, 4, 4 * DIM, dropout=0.0, batch_first=True) for _ in range(2))
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h, src_mask=mask, is_causal=True)
        return self.head(h)


def packed_batches(rank, seed=0):
    g = torch.Generator().manual_seed(seed + rank)
    while True:
        tokens = torch.randint(1, VOCAB, (BATCH, SEQ), generator=g)
        lengths = torch.randint(SEQ // 4, SEQ + 1, (BATCH,), generator=g)
        for row, n in enumerate(lengths.tolist()):
            tokens[row, n:] = PAD
        yield tokens


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))

    torch.manual_seed(0)
    model = TinyLM()
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    data = packed_batches(rank)
    for step in range(30):
        tokens = next(data)
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        local_tokens = (targets != PAD).sum()
        global_tokens = local_tokens.clone()
        dist.all_reduce(global_tokens)                       # real tokens across every rank this step
        model.set_gradient_divide_factor(float(global_tokens))

        logits = model(inputs)
        loss_sum = torch.nn.functional.cross_entropy(
            logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=PAD, reduction="sum")
        loss_sum.backward()
        opt.step()
        opt.zero_grad()
        if rank == 0 and step % 5 == 0:
            print(f"step {step} loss/token {loss_sum.item() / local_tokens.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
