"""lab's pytest plugin on real labs: examples/ci run by a pytest of its own (a subprocess), the way a team's CI runs it:
the tests pass across two nodes, the two multi-node bugs and the hang fail with rank, traceback and cause, the session
goes on after the hang, -n 2 works, and nothing labelled is left after the session, Ctrl-C, or kill -9 and one more
session (which never touches a lab whose owner lives)."""

import importlib.metadata
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "examples/ci"
BUGS = f"{EXAMPLE}/tests/test_known_bugs.py"
HANG = f"{BUGS}::test_swap_with_the_other_rank"
HANG_TIMEOUT = 60  # the hang test's marker


def plugin_args() -> list[str]:
    """Nothing when this checkout's lab is installed with its pytest11 entry point (make setup); else `-p` it."""
    points = importlib.metadata.entry_points(group="pytest11")
    return [] if any(point.value == "lab.testing.plugin" for point in points) else ["-p", "lab.testing.plugin"]


def pytest_argv(prefix: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", *plugin_args(), "-p", "no:cacheprovider", "--lab-name-prefix", prefix,
            *args]


def run_pytest(prefix: str, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(pytest_argv(prefix, *args), cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def labelled(client, prefix: str) -> list[str]:
    """Every container, network and volume of a lab whose name starts with `prefix-`."""
    found = []
    for kind in (client.containers.list(all=True, sparse=True, filters={"label": "io.lab.lab"}),
                 client.networks.list(filters={"label": "io.lab.lab"}),
                 client.volumes.list(filters={"label": "io.lab.lab"})):
        for obj in kind:
            labels = obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels") or {}
            if labels.get("io.lab.lab", "").startswith(f"{prefix}-"):
                found.append(obj.name)
    return found


def lab_names(client, prefix: str) -> set[str]:
    # sparse: labels from the listing itself, so a container another session removes meanwhile is no error
    containers = client.containers.list(all=True, sparse=True, filters={"label": "io.lab.lab"})
    return {container.attrs["Labels"]["io.lab.lab"] for container in containers
            if container.attrs["Labels"]["io.lab.lab"].startswith(f"{prefix}-")}


def wait_for_lab(client, prefix: str, process: subprocess.Popen, seconds: float = 300) -> set[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        names = lab_names(client, prefix)
        running = client.containers.list(sparse=True, filters={"label": f"io.lab.lab={min(names)}"}) if names else []
        if len(names) == 1 and len(running) == 2:
            return names
        time.sleep(1)
    raise AssertionError(f"no lab {prefix}-* came up (pytest exit {process.poll()})")


def cases(junit: Path) -> dict[str, ET.Element]:
    return {case.get("name"): case for case in ET.parse(junit).getroot().iter("testcase")}


@pytest.fixture
def prefix(client):
    name = f"pt{uuid.uuid4().hex[:6]}"
    yield name
    for lab in lab_names(client, name):  # a test that failed half-way: its labs go
        subprocess.run([sys.executable, "-m", "lab.cli", "down", "--name", lab], capture_output=True, cwd=ROOT)


def ci_command(path: Path) -> list[str]:
    """The pytest command line a CI file of examples/ci runs (the one line that calls pytest)."""
    (line,) = [line.strip().removeprefix("- ").removeprefix("run: ") for line in path.read_text().splitlines()
               if "-m pytest" in line]
    return shlex.split(line)


def test_the_ci_jobs_command_passes_across_two_nodes(client, prefix, tmp_path):
    github, gitlab = ci_command(ROOT / EXAMPLE / "github-actions.yml"), ci_command(ROOT / EXAMPLE / "gitlab-ci.yml")
    assert github == gitlab and github[:3] == ["python", "-m", "pytest"] and "--lab-required" in github
    args = [arg.replace("multinode.xml", str(tmp_path / "multinode.xml")) for arg in github[3:]]
    result = run_pytest(prefix, *args)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    found = cases(tmp_path / "multinode.xml")
    assert len(found) == 9 and all(child.tag in ("system-out", "system-err", "properties")
                                   for case in found.values() for child in case)  # no failure, error or skip
    output = found["test_all_mean[dtype0]"].find("system-out").text or ""
    assert "rank 0 (node0):\n" in output and "rank 1 (node1):\n" in output and "1 passed" in output  # named
    assert labelled(client, prefix) == []


def test_multinode_bugs_fail_with_rank_traceback_and_cause(client, prefix, tmp_path):
    junit = tmp_path / "junit.xml"
    result = run_pytest(prefix, BUGS, f"--junitxml={junit}")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    found = cases(junit)
    assert {name for name, case in found.items() if case.find("failure") is not None} == set(found) == {
        "test_resume_from_the_checkpoint_rank_0_saved", "test_shards_cover_the_data_once",
        "test_swap_with_the_other_rank"}, result.stdout[-5000:]

    resume = found["test_resume_from_the_checkpoint_rank_0_saved"].find("failure").text
    assert "1 of 2 ranks failed" in resume
    assert "rank 1 (node1) failed in call:" in resume
    assert "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/ciexample/last.pt'" in resume
    # the lab's diagnosis: the nodes asked after the run say where the file is (else the crash, with its message)
    assert ("why: cause: /tmp/ciexample/last.pt exists on node0 only" in resume
            or "why: cause: rank 1 crashed with FileNotFoundError" in resume) and "fix:" in resume, resume
    assert "_pytest" not in resume.split("failed in call:")[1].split("\n\n")[0]  # the traceback starts at the test

    shards = found["test_shards_cover_the_data_once"].find("failure").text
    assert "ranks 0, 1 (node0, node1) failed in call with the same error:" in shards
    assert shards.count("Traceback (most recent call last):") == 1  # shown once for both ranks

    hang = found["test_swap_with_the_other_rank"]
    text = hang.find("failure").text
    assert f"timed out after {HANG_TIMEOUT} s" in text and "why: cause:" in text
    assert "rank 0 node0" in text and "rank 1 node1" in text and "recv" in text  # where each waited: its stack
    assert float(hang.get("time")) <= HANG_TIMEOUT + 30
    assert "stack of rank 1 (node1)" in result.stdout
    runs = [prop.get("value") for prop in ET.parse(junit).getroot().iter("property") if prop.get("name") == "lab_run"]
    assert len({json.loads((Path(run) / "run.json").read_text())["lab"] for run in runs}) == 1  # on after the hang
    assert labelled(client, prefix) == []


def test_under_xdist_each_worker_its_own_lab(client, prefix, tmp_path):
    junit = tmp_path / "junit.xml"
    result = run_pytest(prefix, "-n", "2", f"{EXAMPLE}/tests/test_on_ranks.py", "-k", "all_mean or own_node",
                        f"--junitxml={junit}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = [prop.get("value") for prop in ET.parse(junit).getroot().iter("property") if prop.get("name") == "lab_run"]
    labs = {json.loads((Path(run) / "run.json").read_text())["lab"] for run in runs}
    assert len(runs) == 3 and 1 <= len(labs) <= 2 and all(lab.startswith(f"{prefix}-") for lab in labs)
    assert labelled(client, prefix) == []


def answer_ctrl_c() -> None:
    """In the child: SIGINT interrupts it (a suite started from a background shell begins with SIGINT ignored, and
    the child would inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_removes_the_lab(client, prefix):
    process = subprocess.Popen(pytest_argv(prefix, HANG), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, preexec_fn=answer_ctrl_c)
    wait_for_lab(client, prefix, process)
    time.sleep(5)  # the ranks are started
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 2, output[-3000:]  # pytest's "interrupted"
    assert labelled(client, prefix) == []


def test_kill_9_leaves_a_lab_the_next_session_removes_and_a_live_one_it_keeps(client, prefix):
    killed = subprocess.Popen(pytest_argv(prefix, HANG), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (victim,) = wait_for_lab(client, prefix, killed)
    other = f"{prefix}x"
    alive = subprocess.Popen(pytest_argv(other, HANG), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=answer_ctrl_c)
    try:
        (survivor,) = wait_for_lab(client, other, alive)
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait()
        assert lab_names(client, prefix) == {victim}  # kill -9: nothing removed it
        again = run_pytest(prefix, f"{EXAMPLE}/tests/test_jobs.py", "-k", "command_on_every_node")
        assert again.returncode == 0, again.stdout[-3000:]
        assert f"removed lab '{victim}', left by a test session that ended without removing it" in again.stdout
        assert labelled(client, prefix) == []
        assert lab_names(client, other) == {survivor}  # its owner lives: never removed by another session
    finally:
        alive.send_signal(signal.SIGINT)
        alive.wait(timeout=120)
    assert labelled(client, other) == []


def test_lab_keep_leaves_the_lab_up_and_says_how_to_reach_it(client, prefix):
    result = run_pytest(prefix, f"{EXAMPLE}/tests/test_jobs.py", "-k", "command_on_every_node", "--lab-keep")
    assert result.returncode == 0, result.stdout[-3000:]
    (kept,) = lab_names(client, prefix)
    said = f"lab '{kept}' kept up (--lab-keep): `lab status --name {kept}`, `lab ssh node0 --name {kept}`"
    assert said in result.stdout
    status = subprocess.run([sys.executable, "-m", "lab.cli", "status", "--name", kept], cwd=ROOT, capture_output=True,
                            text=True)
    assert status.returncode == 0 and "node1" in status.stdout
