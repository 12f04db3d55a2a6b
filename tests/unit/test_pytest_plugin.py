"""lab's pytest plugin without a lab: inert for a suite that does not use it, its markers and keys known, a missing
engine a skip with the reason (an error with --lab-required), owners told apart, a failure text that names ranks.
The plugin on real labs: tests/integration/test_pytest_plugin.py."""

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lab.analysis.record import RunRecord, StepRecord
from lab.model.spec import LabSpec
from lab.testing import plugin
from lab.testing.owners import Owner, process_start
from lab.testing.ranks import RankOutcome, RankTest
from lab.testing.results import JobResult

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
NO_ENGINE = "unix:///nonexistent/docker.sock"


def rank_module():
    path = ROOT / "exercises" / "jobhooks" / "lab_rank_pytest.py"
    spec = importlib.util.spec_from_file_location("lab_rank_pytest", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plugin_args() -> list[str]:
    """Nothing when lab is installed with its pytest11 entry point; else `-p` it (a checkout run from its folder)."""
    points = importlib.metadata.entry_points(group="pytest11")
    return [] if any(point.value == "lab.testing.plugin" for point in points) else ["-p", "lab.testing.plugin"]


def test_the_plugin_is_an_entry_point_of_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"lab": "lab.testing.plugin"}
    assert any(dep.startswith("pytest-xdist") for dep in project["optional-dependencies"]["dev"])


def test_inert_for_a_suite_that_uses_none_of_it(pytester, monkeypatch):
    import lab.testing.labs

    def asked():
        raise AssertionError("the engine was asked")

    monkeypatch.setattr(lab.testing.labs, "engine_problem", asked)
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest_inprocess(*plugin_args(), "--strict-markers", "--strict-config")
    result.assert_outcomes(passed=1)
    assert "= lab =" not in result.stdout.str()


def test_markers_options_and_ini_keys_are_known(pytester):
    pytester.makeini("[pytest]\nlab_nodes = 3\nlab_timeout = 30\nlab_pip =\n    six==1.16.0\n")
    markers = pytester.runpytest_inprocess(*plugin_args(), "--markers", "--strict-config").stdout.str()
    assert "@pytest.mark.lab(nodes=2, nproc_per_node=1" in markers and "@pytest.mark.lab_cluster(" in markers
    usage = pytester.runpytest_inprocess(*plugin_args(), "--help").stdout.str()
    for option in ("--lab-nodes", "--lab-nproc-per-node", "--lab-image", "--lab-timeout", "--lab-keep",
                   "--lab-requirements", "--lab-pip", "--lab-workspace", "--lab-link", "--lab-gpus", "--lab-required"):
        assert option in usage


TWO_TESTS_THAT_NEED_A_LAB = """
    import pytest

    @pytest.mark.lab(nodes=2)
    def test_on_ranks(lab_rank):
        pass

    def test_jobs(lab_cluster):
        pass
"""


def test_no_engine_skips_with_the_reason(pytester, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    pytester.makepyfile(TWO_TESTS_THAT_NEED_A_LAB)
    result = pytester.runpytest_inprocess(*plugin_args(), "--strict-markers", "-rs")
    result.assert_outcomes(skipped=2)
    assert result.stdout.str().count("lab: no Docker engine answers") == 2


def test_lab_required_makes_no_engine_an_error(pytester, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", NO_ENGINE)
    pytester.makepyfile(TWO_TESTS_THAT_NEED_A_LAB)
    result = pytester.runpytest_inprocess(*plugin_args(), "--lab-required")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) + outcomes.get("errors", 0) == 2 and "skipped" not in outcomes
    assert result.stdout.str().count("no Docker engine answers, and --lab-required is set") >= 2  # each error (and -ra)


def test_the_rank_side_knows_the_same_markers_and_ini_keys():
    ranks = rank_module()
    assert ranks.MARKERS == plugin.MARKERS
    assert set(ranks.INI_KEYS) == {ini for ini, _ in [*plugin.SETTINGS.values(), *plugin.FLAGS.values()]}


def test_a_rank_traceback_starts_at_the_test():
    text = ('Traceback (most recent call last):\n'
            '  File "/venv/lib/python3.11/site-packages/_pytest/runner.py", line 361, in from_call\n'
            '    result = func()\n'
            '             ^^^^^^\n'
            '  File "/venv/lib/python3.11/site-packages/pluggy/_caller.py", line 197, in __call__\n'
            '  File "/work/tests/test_x.py", line 15, in test_x\n'
            '    load()\n'
            'FileNotFoundError: /tmp/x\n')
    assert rank_module().without_pytest_frames(text) == ('Traceback (most recent call last):\n'
                                                         '  File "/work/tests/test_x.py", line 15, in test_x\n'
                                                         '    load()\n'
                                                         'FileNotFoundError: /tmp/x\n')


def test_owners_are_told_apart():
    me = Owner.current()
    assert Owner.parse(str(me)) == me and not me.gone()
    assert Owner.parse("made by hand") is None
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start(ended.pid)
    ended.wait()
    assert Owner(me.host, ended.pid, started or "1").gone()
    assert Owner(me.host, os.getpid(), "0").gone()  # the pid lives, but it is another process now
    assert not Owner("elsewhere", ended.pid, "1").gone()  # another host's: this one cannot tell


def test_the_owner_is_not_part_of_what_a_lab_is():
    plain = LabSpec(name="a", nodes=2)
    owned = LabSpec(name="a", nodes=2, owner="host:1:2")
    assert "owner" not in plain.to_dict() and owned.to_dict()["owner"] == "host:1:2"
    assert plain.fingerprint() == owned.fingerprint()
    assert LabSpec.from_dict(owned.to_dict()) == owned


def test_ranks_with_one_traceback_are_named_together(tmp_path):
    record = RunRecord("20261125-run-torchrun", "torchrun", "pytest-abc123-1", tmp_path, status="failed",
                       steps=[StepRecord("main", exit_codes={0: 1, 1: 1, 2: None}, nproc_per_node=1)])
    same = "Traceback (most recent call last):\nAssertionError: assert [0, 0] == [0, 1]"
    ranks = [RankOutcome(0, 0, "node0", "failed", "call", same), RankOutcome(1, 1, "node1", "failed", "call", same),
             RankOutcome(2, 2, "node2", "no result", ended="SIGKILL")]
    text = RankTest(JobResult(record), ranks, 60, "pytest-abc123-1").failure_text()
    assert text.startswith("3 of 3 ranks failed (lab 'pytest-abc123-1', 3 nodes x 1, run 20261125-run-torchrun)")
    assert text.count("AssertionError") == 1
    assert "ranks 0, 1 (node0, node1) failed in call with the same error:" in text
    assert "rank 2 (node2) gave no result: SIGKILL" in text
    assert RankTest(JobResult(record), ranks, 60, "x").outcome == "failed"


def test_lab_cluster_stops_a_failed_job_after_its_fail_grace_as_lab_exec_and_lab_torchrun_do(monkeypatch):
    """5 s after every process of a node failed by default, what the test asks (the CLI's 10 s), 0: the timeout."""
    from lab.testing import cluster

    asked = []
    monkeypatch.setattr(cluster.adhoc, "run_exec",
                        lambda *args, fail_grace: asked.append(("exec", args[5], fail_grace)))
    monkeypatch.setattr(cluster.adhoc, "run_torchrun",
                        lambda *args, fail_grace: asked.append(("torchrun", args[6], fail_grace)))
    monkeypatch.setattr(cluster, "job_result", lambda record: record)
    nodes = cluster.LabCluster(target=object(), timeout=60)
    nodes.exec(["true"])
    nodes.exec(["true"], timeout=30, fail_grace=10)
    nodes.torchrun("train.py", fail_grace=0)
    nodes.module("mypkg.train")
    assert asked == [("exec", 60, 5.0), ("exec", 30, 10), ("torchrun", 60, None), ("torchrun", 60, 5.0)]


def test_the_ranks_pytest_leaves_labs_own_plugin_out_where_the_node_can_see_lab(pytester):
    """A rank's pytest whose Python can import lab (an editable install's lab.egg-info in the workspace, as in this
    project's own suite, or `--lab-image host`) would load lab's plugin by its entry point, which would take the test
    to a lab again from inside the rank: the rank's arguments disable it by that entry point's name."""
    from lab.testing.ranks import rank_pytest_args

    name = next(iter(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["pytest11"]))
    args = rank_pytest_args(Path("t.py"), "test_x", Path("/w"), None)
    assert args[args.index(f"no:{name}") - 1] == "-p"
    pytester.makepyfile(test_body="import pytest\n\n@pytest.mark.lab(nodes=2)\ndef test_x():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", f"no:{name}", "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=1)  # the body ran in this process, as in a rank; no lab was asked for
