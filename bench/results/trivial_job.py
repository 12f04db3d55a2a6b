import torch.distributed as dist
dist.init_process_group('gloo')
dist.barrier()
dist.destroy_process_group()
