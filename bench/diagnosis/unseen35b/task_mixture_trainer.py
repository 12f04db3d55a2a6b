"""Multi-task pretraining over a weighted mixture of datasets.

Every step draws one task from the mixture (temperature-scaled sampling
weights), builds a batch for it and runs the task's head. The retrieval task
uses in-batch negatives gathered from every worker."""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

DATASET_SIZES = {"caption_retrieval": 40000, "vqa": 25000, "ocr_cls": 8000}
TEMPERATURE = 2.0
STEPS = 30
VOCAB, MASK_ID = 500, 1


def mixture_weights():
    sizes = torch.tensor([float(s) for s in DATASET_SIZES.values()])
    w = sizes ** (1.0 / TEMPERATURE)
    return w / w.sum()


class MultiTaskModel(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, width, mode="mean")
        self.image_proj = nn.Linear(32, width)
        self.trunk = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.heads = nn.ModuleDict({
            "caption_retrieval": nn.Linear(width, width),
            "vqa": nn.Linear(width, 20),
            "ocr_cls": nn.Linear(width, 8),
        })

    def forward(self, task, tokens, images):
        h = self.trunk(self.embed(tokens) + self.image_proj(images))
        return self.heads[task](h), self.image_proj(images)


def load_shard_batch(task, gen, n=16):
    lengths = torch.randint(8, 40, (n,), generator=gen)
    tokens = torch.randint(2, VOCAB, (n, int(lengths.max())), generator=gen)
    images = torch.randn(n, 32, generator=gen)
    labels = torch.randint(0, 20 if task == "vqa" else 8, (n,), generator=gen)
    return tokens, lengths, images, labels


def span_mask(tokens, lengths, ratio=0.15):
    tokens = tokens.clone()
    for i, n in enumerate(lengths.tolist()):
        k = max(1, int(n * ratio))
        pos = torch.randperm(n)[:k]
        tokens[i, pos] = MASK_ID
    return tokens


def gather_negatives(x):
    out = [torch.zeros_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(out, x.detach().contiguous())
    out[dist.get_rank()] = x
    return torch.cat(out)


def task_loss(task, out, img_emb, labels):
    if task == "caption_retrieval":
        txt = F.normalize(out, dim=-1)
        img = F.normalize(gather_negatives(img_emb), dim=-1)
        logits = txt @ img.t() / 0.07
        target = torch.arange(txt.size(0)) + dist.get_rank() * txt.size(0)
        return F.cross_entropy(logits, target)
    return F.cross_entropy(out, labels)


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    torch.manual_seed(1234)
    model = DDP(MultiTaskModel(), find_unused_parameters=True)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    weights = mixture_weights()
    tasks = list(DATASET_SIZES)
    data_gen = torch.Generator().manual_seed(100 + rank)

    for step in range(STEPS):
        task = tasks[torch.multinomial(weights, 1).item()]
        tokens, lengths, images, labels = load_shard_batch(task, data_gen)
        tokens = span_mask(tokens, lengths)
        out, img_emb = model(task, tokens, images)
        loss = task_loss(task, out, img_emb, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} task {task} loss {loss.item():.4f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
