from pathlib import Path

import pytest

from lab.jobs.adhoc import fill_placeholders, parse_env
from lab.errors import SpecError
from lab.jobs.exercises import load_exercise
from lab.nodes.faults import netem_args, parse_node
from lab.jobs.slurm import slurm_script


def test_placeholders_filled_per_node():
    values = {"node_rank": 1, "nnodes": 2, "rank": 1, "world_size": 2, "master_addr": "node0", "master_port": 29500}
    argv = ["python", "t.py", "--rank", "{rank}", "--world-size={world_size}", "--init=tcp://{master_addr}:{master_port}", "{{literal}}"]
    assert fill_placeholders(argv, values) == ["python", "t.py", "--rank", "1", "--world-size=2", "--init=tcp://node0:29500", "{literal}"]


@pytest.mark.parametrize("arg", ["{nope}", "{rank", "{0}"])
def test_bad_placeholders(arg):
    with pytest.raises(SpecError):
        fill_placeholders([arg], {"rank": 0})


def test_parse_env():
    assert parse_env(("A=1", "B=x=y", "C=")) == {"A": "1", "B": "x=y", "C": ""}
    for bad in ("A", "=1", "1A=2"):
        with pytest.raises(SpecError):
            parse_env((bad,))


def test_netem_args():
    assert netem_args(50, 10, None) == ["delay", "50ms", "10ms"]
    assert netem_args(None, None, "100mbit") == ["rate", "100mbit"]
    assert netem_args(5, None, "1gbit") == ["delay", "5ms", "rate", "1gbit"]
    with pytest.raises(SpecError):
        netem_args(None, None, None)
    with pytest.raises(SpecError):
        netem_args(None, 5, None)


def test_parse_node():
    assert parse_node("node1", 2) == 1 and parse_node("0", 2) == 0
    for bad in ("node2", "x", "-1", "node"):
        with pytest.raises(SpecError):
            parse_node(bad, 2)


def test_slurm_script_lines(tmp_path: Path):
    folder = tmp_path / "exercise03_torchrun"
    folder.mkdir()
    (folder / "train.py").write_text("")
    (folder / "exercise.yaml").write_text(
        "launcher: torchrun\nprogram: train.py\nsteps:\n  - name: a\n    args: [--epochs, '2']\n  - name: b\n    expect: fail\n")
    script = slurm_script(load_exercise(folder), nodes=4, nproc_per_node=2, gpus_per_node=2, partition="gpu")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for line in ("#SBATCH --nodes=4", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=2", "#SBATCH --partition=gpu"):
        assert line in lines
    assert any("scontrol show hostnames" in line for line in lines)
    sruns = [line for line in lines if line.startswith("srun --nodes=$SLURM_NNODES")]
    assert len(sruns) == 2
    assert "--nproc-per-node=2" in sruns[0] and "--rdzv-endpoint=$head_node_ip:29500" in sruns[0]
    assert "--rdzv-backend=c10d" in sruns[0] and sruns[0].endswith("train.py --epochs 2")
    assert sruns[1].endswith("|| true  # this step is expected to fail")
