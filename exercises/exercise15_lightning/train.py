"""A small regression as a LightningModule, trained with Trainer(accelerator="cpu", strategy="ddp") across nodes.

Under torchrun each worker has RANK/LOCAL_RANK/WORLD_SIZE and Lightning only checks that devices x num_nodes equals
WORLD_SIZE. Started once per node (the lab's per-node launch), Lightning reads MASTER_ADDR, MASTER_PORT and
NODE_RANK and starts `devices` processes itself.
"""

import os

import torch
import lightning as L

import labkit

SAMPLES, FEATURES, BATCH, EPOCHS = 512, 8, 16, 3


class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(FEATURES, 1)
        self.epoch_losses: list[float] = []
        self.batch_losses: list[torch.Tensor] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.batch_losses.append(loss.detach())
        return loss

    def on_train_epoch_end(self):
        mean = torch.stack(self.batch_losses).mean()
        self.epoch_losses.append(self.all_gather(mean).mean().item())
        self.batch_losses.clear()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main() -> None:
    devices = labkit.env_int("LOCAL_WORLD_SIZE", labkit.nproc_per_node())
    num_nodes = labkit.env_int("GROUP_WORLD_SIZE", labkit.nnodes())
    torch.manual_seed(0)
    inputs = torch.randn(SAMPLES, FEATURES)
    targets = inputs @ torch.linspace(-1, 1, FEATURES).unsqueeze(1) + 0.1 * torch.randn(SAMPLES, 1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, targets), batch_size=BATCH)
    trainer = L.Trainer(accelerator="cpu", devices=devices, num_nodes=num_nodes, strategy="ddp", max_epochs=EPOCHS,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    model = Regression()
    trainer.fit(model, loader)
    rank = trainer.global_rank
    labkit.write_result(rank, world_size=trainer.world_size, local_rank=trainer.local_rank, node=trainer.node_rank,
                        backend=torch.distributed.get_backend(), batches=trainer.num_training_batches,
                        params_hash=labkit.parameters_hash(model), first_loss=model.epoch_losses[0],
                        final_loss=model.epoch_losses[-1], launched_by_torchrun="TORCHELASTIC_RUN_ID" in os.environ)
    labkit.finish()


if __name__ == "__main__":
    main()
