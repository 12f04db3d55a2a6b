"""`accelerate launch` on this node, with the machine flags filled from the lab's environment.

--num_processes is the TOTAL across machines (Accelerate divides it by --num_machines); --multi_gpu is what makes
Accelerate start its workers with torchrun at all: without it (or with --cpu) it runs the script once per machine.
"""

import os
import sys

from accelerate.commands.launch import launch_command, launch_command_parser

import labkit

here = os.path.dirname(os.path.abspath(__file__))
nnodes, per_node = labkit.nnodes(), labkit.nproc_per_node()
argv = ["--multi_gpu", "--num_machines", str(nnodes), "--machine_rank", str(labkit.node_rank()),
        "--num_processes", str(nnodes * per_node), "--main_process_ip", os.environ["MASTER_ADDR"],
        "--main_process_port", os.environ["MASTER_PORT"], "--rdzv_backend", "static", "--mixed_precision", "no",
        "--dynamo_backend", "no", os.path.join(here, "train.py")]
print(f"accelerate launch {' '.join(argv)}", flush=True)
launch_command(launch_command_parser().parse_args(argv))
sys.exit(0)
