"""The records' bound on a real lab: runs beyond it go oldest first, a pinned run stays, what is left still opens."""

import json
import uuid

import pytest

from tests.integration.conftest import NAME_PREFIX, lab

pytestmark = pytest.mark.docker


@pytest.fixture
def lab_with_own_records(tmp_path):
    """A 2-node lab whose run records live in a LAB_HOME of their own (nothing else prunes or adds runs there)."""
    name = f"{NAME_PREFIX}{uuid.uuid4().hex[:6]}"
    env = {"LAB_HOME": str(tmp_path / "home")}
    lab("up", "--nodes", "2", "--name", name, check=True, env=env)
    yield name, env
    lab("down", "--name", name, env=env)


def run_ids(env) -> list[str]:
    return [run["run_id"] for run in json.loads(lab("runs", "--json", check=True, env=env).stdout)]


def test_bound_removes_oldest_runs_keeps_pinned_and_the_rest_opens(lab_with_own_records):
    name, env = lab_with_own_records
    for command in (["true"], ["sh", "-c", "exit 3"], ["true"]):  # the second fails: explain has a finding
        lab("exec", "--name", name, "--", *command, env=env)
    first, failed, third = run_ids(env)
    bounded = {**env, "LAB_RUNS_MAX_COUNT": "3"}

    lab("exec", "--name", name, "--", "true", env=bounded)  # a 4th run: the oldest goes
    assert run_ids(env)[:2] == [failed, third] and len(run_ids(env)) == 3

    assert "is now kept" in lab("runs", "--keep", failed, check=True, env=env).stdout
    lab("exec", "--name", name, "--", "true", env=bounded)  # the pinned run stays; the oldest unpinned one goes
    left = run_ids(env)
    assert failed in left and third not in left and len(left) == 3

    sizes = lab("runs", check=True, env=env).stdout
    assert "(kept)" in sizes and "bound: 500 runs, 1.0 GiB" in sizes
    for run in left:
        assert lab("show", run, env=env).returncode == 0
        assert lab("report", run, env=env).returncode == 0
    assert lab("explain", failed, check=True, env=env).stdout.strip()

    dry = json.loads(lab("runs", "--prune", "--max-count", "1", "--dry-run", "--json", check=True, env=env).stdout)
    assert [r["run"] for r in dry["removed"]] == [run for run in left if run != failed]  # the pinned one counts
    assert run_ids(env) == left  # a dry run removes nothing
    bad = lab("runs", "--prune", "--max-age", "soon", env=env)
    assert bad.returncode == 2 and "is not an age" in bad.stderr and "Traceback" not in bad.stderr
