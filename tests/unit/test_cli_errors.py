"""Bad input gets one error line (plus a hint), a non-zero exit, and no traceback."""

import subprocess
import sys

import pytest

NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}


def lab(*args, env=None):
    import os

    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def assert_one_line_error(result, code, *needles):
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error:"), lines
    for needle in needles:
        assert needle in result.stderr, result.stderr


@pytest.mark.parametrize("args,code,needle", [
    (["up", "--nodes", "0"], 2, "--nodes must be at least 1"),
    (["up", "--nodes", "abc"], 2, "'abc' is not a valid integer"),
    (["up", "--nodes", "1000"], 2, "--nodes 1000"),
    (["up", "--name", "Bad Name"], 2, "lab name 'Bad Name'"),
    (["up", "--memory", "lots"], 2, "memory 'lots'"),
    (["up", "--cpus", "-1"], 2, "--cpus must be positive"),
    (["up", "--nproc-per-node", "0"], 2, "--nproc-per-node"),
    (["up", "--bogus"], 2, "No such option"),
    (["run"], 2, "name an exercise"),
    (["run", "exercise99"], 2, "no exercise named 'exercise99'"),
    (["run", "exercise01", "--backend", "mpi"], 2, "'mpi' is not one of"),
    (["run", "exercise01", "--timeout", "0"], 2, "--timeout"),
    (["run", "1", "exercise99"], 2, "no exercise named 'exercise99'"),
    (["run", "--all", "--jobs", "2", "--on", "host"], 2, "--jobs runs exercises on copies of a lab"),
    (["run", "--all", "--jobs", "9"], 2, "9 is not in the range 1<=x<=8"),
    (["run", "--all", "--jobs", "2", "--name", "a" * 30], 2, "too long to name its copies"),
    (["frobnicate"], 2, "No such command"),
    (["runs", "--max-count", "2"], 2, "--max-count only go with --prune"),
    (["runs", "--prune", "--max-size", "big"], 2, "--max-size: 'big' is not a size"),
    (["runs", "--prune", "--max-age", "7"], 2, "--max-age: '7' is not an age"),
])
def test_bad_input(args, code, needle):
    assert_one_line_error(lab(*args, env=NO_ENGINE), code, needle)


@pytest.mark.parametrize("args", [["status"], ["down"], ["up", "--nodes", "2"], ["provision"], ["run", "exercise01"]])
def test_engine_down_is_one_clear_line(args, tmp_path):
    # a LAB_HOME of its own: under xdist, `up` in one worker holds lab 'default' while `provision` runs in another
    assert_one_line_error(lab(*args, env={**NO_ENGINE, "LAB_HOME": str(tmp_path)}), 3, "no Docker engine answers",
                          "make engine")


def test_help_teaches():
    result = lab("--help")
    assert result.returncode == 0
    for word in ("lab up --nodes 2", "lab run exercise03", "lab down"):
        assert word in result.stdout
    up_help = lab("up", "--help").stdout
    assert "--recreate" in up_help and "Examples" in up_help
