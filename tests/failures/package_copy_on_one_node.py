"""A classifier whose vocabulary size comes from the project's tokenizer package (`tinytok`, shipped beside the script).
Run with a second, older copy of tinytok first on node1's PYTHONPATH (a pip --user install left from before):

  lab exec --copy tests/failures/package_copy_on_one_node.py -- bash -c 'if [ "$NODE_RANK" = 1 ]; then mkdir -p
    ~/pylib/tinytok && printf "__version__ = \\"0.9.1\\"\\nVOCAB = 1000\\n" > ~/pylib/tinytok/__init__.py;
    export PYTHONPATH=~/pylib; fi; exec python package_copy_on_one_node.py'
"""
import datetime
import os
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
package = here / "vendor" / "tinytok"
package.mkdir(parents=True, exist_ok=True)
written = package / f"__init__.py.{os.getpid()}"  # every node writes it into the shared folder: whole, at once
written.write_text('__version__ = "1.2.0"\nVOCAB = 1024\n')
os.replace(written, package / "__init__.py")
sys.path.append(str(here / "vendor"))  # after PYTHONPATH: a copy found there first wins

import tinytok  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

rank = int(os.environ.get("RANK", os.environ.get("NODE_RANK", 0)))
world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("NNODES", 1)))
dist.init_process_group("gloo", rank=rank, world_size=world_size,
                        timeout=datetime.timedelta(seconds=int(os.environ.get("PG_TIMEOUT", 10))))
model = DDP(torch.nn.Sequential(torch.nn.Embedding(tinytok.VOCAB, 16), torch.nn.Linear(16, 2)))
print(f"rank {rank}: model built")
dist.destroy_process_group()
