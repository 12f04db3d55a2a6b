from pathlib import Path

import pytest

from lab.errors import SpecError
from lab.jobs.exercises import LaunchContext, discover, find, load_exercise, step_command


def make_exercise(root: Path, folder: str, manifest: str, program: str = "prog.py") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "exercise.yaml").write_text(manifest)
    (path / program).write_text("print('hi')\n")
    (path / "check.py").write_text("def check(run):\n    return []\n")
    return path


CTX = LaunchContext(node_rank=1, nnodes=2, nproc_per_node=3, master_addr="node0", master_port=29500, python="/py",
                    exercises_dir="/ex", results_dir="/r", work_dir="/w", run_id="run1-main")


def test_per_node_command(tmp_path):
    exercise = load_exercise(make_exercise(tmp_path, "exercise01_join", "launcher: per-node\nprogram: prog.py\nargs: [--x, 1]\n"))
    argv, env = step_command(exercise, exercise.steps[0], CTX)
    assert argv == ["/py", "/ex/exercise01_join/prog.py", "--x", "1"]
    assert env["NODE_RANK"] == "1" and env["NNODES"] == "2" and env["NPROC_PER_NODE"] == "3"
    assert env["MASTER_ADDR"] == "node0" and env["LAB_RESULTS_DIR"] == "/r"
    assert env["PYTHONPATH"] == "/ex/jobhooks:/ex"  # line-buffered output first, then the exercises' labkit


def test_torchrun_c10d_and_static(tmp_path):
    manifest = "launcher: torchrun\nprogram: prog.py\nsteps:\n  - name: a\n  - name: b\n    rdzv: static\n    nnodes: '1:2'\n    max_restarts: 3\n"
    exercise = load_exercise(make_exercise(tmp_path, "exercise03_torchrun", manifest))
    c10d, _ = step_command(exercise, exercise.steps[0], CTX)
    assert "--rdzv-backend=c10d" in c10d and "--rdzv-endpoint=node0:29500" in c10d and "--nnodes=2" in c10d
    assert not any(arg.startswith("--node-rank") for arg in c10d)
    static, _ = step_command(exercise, exercise.steps[1], CTX)
    assert "--node-rank=1" in static and "--nnodes=1:2" in static and "--max-restarts=3" in static
    assert static[-1].endswith("prog.py")


def test_step_overrides(tmp_path):
    manifest = ("launcher: per-node\nprogram: prog.py\ntimeout: 50\nenv: {A: '1'}\nsteps:\n"
                "  - name: broken\n    expect: fail\n    timeout: 5\n    env: {B: '2'}\n"
                "    fault: {when_file: snap.pt, action: kill-worker, node: 1}\n")
    exercise = load_exercise(make_exercise(tmp_path, "exercise12_trouble", manifest))
    step = exercise.steps[0]
    assert (step.expect, step.timeout, exercise.timeout) == ("fail", 5, 50)
    assert dict(step.fault) == {"when_file": "snap.pt", "action": "kill-worker", "node": "1"}
    _, env = step_command(exercise, step, CTX)
    assert env["A"] == "1" and env["B"] == "2"


@pytest.mark.parametrize("manifest", ["launcher: mpirun\nprogram: prog.py\n", "program: missing.py\n",
                                      "program: prog.py\nsteps:\n  - name: x\n    expect: maybe\n", "[unclosed", "- a list\n"])
def test_bad_manifests(tmp_path, manifest):
    with pytest.raises(SpecError):
        load_exercise(make_exercise(tmp_path, "exercise07_bad", manifest))


def test_find_by_number_and_name(tmp_path):
    make_exercise(tmp_path, "exercise02_spawn", "program: prog.py\n")
    make_exercise(tmp_path, "exercise10_faults", "program: prog.py\n")
    (tmp_path / "not_an_exercise").mkdir()
    assert [e.name for e in discover(tmp_path)] == ["exercise02", "exercise10"]
    assert find("2", tmp_path).slug == "spawn"
    assert find("exercise10", tmp_path).name == "exercise10"
    assert find("exercise10_faults", tmp_path).number == 10
    with pytest.raises(SpecError) as error:
        find("exercise99", tmp_path)
    assert "lab exercises" in error.value.hint


def test_repo_exercises_all_load():
    exercises = discover()
    assert [e.number for e in exercises] == sorted(e.number for e in exercises)
    for exercise in exercises:
        assert (exercise.path / "README.md").is_file(), exercise.name
        assert callable(exercise.load_checker())
