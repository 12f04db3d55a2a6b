"""Two-phase fine-tuning of an image+text classifier.

Phase 1 trains the fusion layers and the head on top of pretrained (frozen)
modality encoders; phase 2 unfreezes the encoders with a smaller learning
rate. Gradient norms are cross-checked between workers every step.
"""
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

PHASE1_STEPS = 8
TOTAL_STEPS = 16
BATCH = 16


class ImageTextClassifier(nn.Module):
    def __init__(self, img_dim=48, vocab=200, width=64, classes=6):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Linear(img_dim, width), nn.GELU(), nn.Linear(width, width))
        self.text_encoder = nn.EmbeddingBag(vocab, width, mode="mean")
        self.fusion = nn.Sequential(nn.Linear(2 * width, width), nn.GELU())
        self.head = nn.Linear(width, classes)

    def encoders(self):
        return [self.image_encoder, self.text_encoder]

    def forward(self, images, tokens):
        z = torch.cat([self.image_encoder(images), self.text_encoder(tokens)], dim=-1)
        return self.head(self.fusion(z))


def set_trainable(modules, flag):
    for m in modules:
        for p in m.parameters():
            p.requires_grad_(flag)


def check_grad_norms(model, step):
    grads = [p.grad.detach().flatten() for p in model.parameters() if p.grad is not None]
    norm = torch.cat(grads).norm().reshape(1)
    norms = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(norms, norm)
    norms = torch.cat(norms)
    if (norms - norms[0]).abs().max() > 1e-6 * (1 + norms[0].abs()):
        raise FloatingPointError(
            f"step {step}: gradients are inconsistent between workers: "
            + ", ".join(f"rank{i}={v:.6f}" for i, v in enumerate(norms.tolist()))
        )
    return norm.item()


def make_batch(gen):
    images = torch.randn(BATCH, 48, generator=gen)
    tokens = torch.randint(0, 200, (BATCH, 12), generator=gen)
    labels = torch.randint(0, 6, (BATCH,), generator=gen)
    return images, tokens, labels


def main():
    timeout = datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", "60")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()

    torch.manual_seed(0)
    model = ImageTextClassifier()
    set_trainable(model.encoders(), False)
    ddp = DDP(model)

    head_params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(head_params, lr=1e-3)
    gen = torch.Generator().manual_seed(1000 + rank)

    for step in range(TOTAL_STEPS):
        if step == PHASE1_STEPS:
            set_trainable(model.encoders(), True)
            enc_params = [p for m in model.encoders() for p in m.parameters()]
            opt.add_param_group({"params": enc_params, "lr": 1e-4})
            if rank == 0:
                print(f"step {step}: phase 2, encoders unfrozen", flush=True)
        images, tokens, labels = make_batch(gen)
        loss = F.cross_entropy(ddp(images, tokens), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = check_grad_norms(model, step)
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f} gnorm {gnorm:.4f}", flush=True)

    if rank == 0:
        torch.save(model.state_dict(), "finetuned.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
