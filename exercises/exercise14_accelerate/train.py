"""A small regression trained with Hugging Face Accelerate: the same script whoever starts it (torchrun or
`accelerate launch`). Accelerator(cpu=True) picks gloo on CPU nodes; prepare() wraps the model in DDP and gives
each rank its shard of the data."""

import torch
from accelerate import Accelerator

import labkit

SAMPLES, FEATURES, BATCH, EPOCHS = 512, 8, 16, 3


def main() -> None:
    accelerator = Accelerator(cpu=True)
    rank = accelerator.process_index
    torch.manual_seed(0)  # the same data on every rank; the sampler prepare() adds splits it
    inputs = torch.randn(SAMPLES, FEATURES)
    targets = inputs @ torch.linspace(-1, 1, FEATURES).unsqueeze(1) + 0.1 * torch.randn(SAMPLES, 1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs, targets), batch_size=BATCH, shuffle=True)
    torch.manual_seed(rank)  # different initial weights per rank: prepare() must make them equal
    model = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for epoch in range(EPOCHS):
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        losses.append(accelerator.gather(loss.detach().reshape(1)).mean().item())
        labkit.log(rank, f"epoch {epoch}: mean loss {losses[-1]:.4f}")
    labkit.write_result(rank, world_size=accelerator.num_processes, local_rank=accelerator.local_process_index,
                        distributed_type=str(accelerator.distributed_type.value), backend=accelerator.state.backend,
                        batches=len(loader), params_hash=labkit.parameters_hash(accelerator.unwrap_model(model)),
                        first_loss=losses[0], final_loss=losses[-1])
    accelerator.wait_for_everyone()
    labkit.finish()  # destroys the group (left up, gloo's threads can abort the process at exit)


if __name__ == "__main__":
    main()
