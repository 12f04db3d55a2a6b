"""lab export slurm: the sbatch script of an exercise."""

from pathlib import Path

from click.testing import CliRunner

from lab.cli import cli
from lab.jobs.exercises import load_exercise
from lab.jobs.slurm import exercise_of, slurm_script


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


def test_slurm_export_of_exercise03():
    result = CliRunner().invoke(cli, ["export", "slurm", "exercise03"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "#SBATCH --nodes=2" in lines and "#SBATCH --ntasks-per-node=1" in lines
    assert any(line.startswith("head_node=$(scontrol show hostnames") for line in lines)
    assert any(line.startswith("export MASTER_ADDR=$head_node_ip MASTER_PORT=29500") for line in lines)
    sruns = [line for line in lines if line.startswith("srun --nodes=$SLURM_NNODES --ntasks-per-node=1 ")]
    assert len(sruns) == 1
    assert '"$PYTHON" -m torch.distributed.run --nnodes=$SLURM_NNODES --nproc-per-node=2' in sruns[0]
    assert "--rdzv-backend=c10d --rdzv-endpoint=$head_node_ip:29500" in sruns[0]
    assert sruns[0].endswith('"$LAB_EXERCISES"/exercise03_torchrun/train.py --epochs 6')
    # what differs between a real cluster and the lab's is read from variables with defaults
    assert ': "${LAB_EXERCISES:=$SLURM_SUBMIT_DIR/exercises}"' in lines and ': "${PYTHON:=python3}"' in lines
    assert lines[1] == "# lab: exercise03 nproc-per-node=2"
    assert exercise_of(result.output) == ("exercise03", 2) and exercise_of("#!/bin/bash\nhostname\n") is None


def test_slurm_export_of_an_exercise_with_packages_installs_them_on_every_node_first():
    result = CliRunner().invoke(cli, ["export", "slurm", "exercise14"])
    assert result.exit_code == 0, result.output
    sruns = [line for line in result.output.splitlines() if line.startswith("srun ")]
    assert sruns[0].startswith("srun --nodes=$SLURM_NNODES --ntasks-per-node=1 ")
    assert sruns[0].endswith('"$PYTHON" -m pip install --quiet --disable-pip-version-check accelerate==1.15.0')
    assert "pip install" not in CliRunner().invoke(cli, ["export", "slurm", "exercise03"]).output
