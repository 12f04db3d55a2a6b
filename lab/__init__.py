"""lab: a containerised multi-node lab for PyTorch distributed training."""

__version__ = "0.1.0"
