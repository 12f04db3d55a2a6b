"""Exercise 04: train a character-level GPT with DDP across nodes, snapshot it, resume it.

torchrun starts the workers; DDP averages gradients so every replica stays identical; a
DistributedSampler hands each rank its own share of the text. After every epoch rank 0
alone writes a snapshot (weights, optimizer state, epochs done) to the folder all nodes
share. A later launch with a larger --epochs loads that snapshot and trains only the
epochs that are left; at the end rank 0 samples some text from the model.
"""

import argparse
import math
import os

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, Dataset

import corpus
import labkit
from gpt import GPT, GPTConfig

SNAPSHOT = "mingpt-snapshot.pt"
PROMPT = "the "


class CharChunks(Dataset):
    """Consecutive, non-overlapping windows of block_size + 1 characters: inputs and next-character targets."""

    def __init__(self, text: str, block_size: int):
        self.chars = sorted(set(text))
        self.index = {char: i for i, char in enumerate(self.chars)}
        self.data = torch.tensor([self.index[char] for char in text], dtype=torch.long)
        self.block_size = block_size

    def __len__(self) -> int:
        return (len(self.data) - 1) // self.block_size

    def __getitem__(self, i: int):
        chunk = self.data[i * self.block_size: (i + 1) * self.block_size + 1]
        return chunk[:-1], chunk[1:]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def save_snapshot(path: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer, epochs_run: int,
                  steps_run: int) -> None:
    """Write to a temporary name, then rename: a reader never sees half a snapshot."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epochs_run": epochs_run,
             "steps_run": steps_run}
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, required=True, help="train until this many epochs are done in all")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--block-size", type=int, default=32)
    parser.add_argument("--sample-chars", type=int, default=120)
    args = parser.parse_args()

    ids = labkit.torchrun_env()
    rank = ids.pop("rank")
    backend, device = labkit.init(local_rank=ids["local_rank"])
    dataset = CharChunks(corpus.text(), args.block_size)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=len(dataset.chars), block_size=args.block_size)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    snapshot_path = os.path.join(labkit.work_dir(), SNAPSHOT)
    start_epoch = step = 0
    loaded_hash = None
    if os.path.exists(snapshot_path):
        snapshot = torch.load(snapshot_path, map_location=device)
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        start_epoch, step = snapshot["epochs_run"], snapshot["steps_run"]
        loaded_hash = labkit.parameters_hash(model)
        labkit.log(rank, f"resumed from {SNAPSHOT}: {start_epoch} epoch(s) already done")

    ddp_model = labkit.wrap_ddp(model, device)
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    labkit.log(rank, f"{len(sampler)} of {len(dataset)} windows, {len(loader)} steps per epoch, backend {backend}")

    first_loss = epoch_loss = math.nan
    epochs_trained = []
    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)  # a different shuffle each epoch, the same on every rank
        losses = []
        for inputs, targets in loader:
            _, loss = ddp_model(inputs.to(device), targets.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            labkit.append_metric(rank, step=step, epoch=epoch, loss=loss.item())
            step += 1
        if not epochs_trained:
            first_loss = labkit.global_mean(losses[0], device)
        epoch_loss = labkit.global_mean(sum(losses) / len(losses), device)
        epochs_trained.append(epoch)
        if rank == 0:
            save_snapshot(snapshot_path, model, optimizer, epoch + 1, step)
            labkit.log(rank, f"epoch {epoch}: mean loss {epoch_loss:.3f}, snapshot saved")

    sample = ""
    if rank == 0:
        model.eval()
        prompt = torch.tensor([[dataset.index[char] for char in PROMPT]], device=device)
        generator = torch.Generator(device=device).manual_seed(0)
        sample = dataset.decode(model.generate(prompt, args.sample_chars, generator)[0].tolist())
        labkit.log(rank, f"sample:\n{sample}")

    labkit.write_result(rank, **ids, backend=backend, pg_world_size=dist.get_world_size(),
                        dataset_size=len(dataset), block_size=args.block_size, samples=len(sampler),
                        start_epoch=start_epoch, epochs_total=args.epochs, epochs_trained=epochs_trained,
                        loaded_params_hash=loaded_hash, first_loss=first_loss, final_loss=epoch_loss,
                        params_hash=labkit.parameters_hash(model), sample=sample, prompt=PROMPT,
                        sample_chars=args.sample_chars)
    labkit.finish()


if __name__ == "__main__":
    main()
