"""Run records (save, load, old records) and targets (resolution, the --driver alias), without Docker."""

import json
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab import paths
from lab.analysis.record import SCHEMA_VERSION, RunRecord, StepRecord, list_runs, load
from lab.cli import cli
from lab.errors import LabStateError, SpecError
from lab.jobs import targets
from lab.jobs.checks import Check

# A run.json as `lab exec` wrote it before records had a schema version: no version, no diagnosis, no expect.
OLD_EXEC_RECORD = {
    "run_id": "20240101-120000-000-exec", "exercise": "exec", "lab": "default", "status": "failed", "passed": False,
    "seconds": 3.5, "steps": [{"step": "main", "command": ["hostname"], "exit_codes": {"0": 0, "1": 2},
                               "timed_out": False, "seconds": 3.4, "oom_killed": [1]}],
    "checks": [{"name": "every node exited 0", "passed": False, "detail": "exit codes {1: 2}"}],
    "path": "/somewhere/else/20240101-120000-000-exec", "curves": None, "error": None,
}


def a_record() -> RunRecord:
    record = RunRecord.new("exercise03", "lab1")
    record.status, record.seconds, record.curves, record.error = "failed", 12.25, record.path / "loss.png", "boom"
    record.steps = [StepRecord("main", expect="pass", exit_codes={0: 0, 1: None}, timed_out=True, seconds=10.5,
                               ranks_reported=[0, 1], oom_killed=[1], fault={"action": "kill-node", "node": 1},
                               fault_injected=True, problem="step 'main' timed out after 10 s"),
                    StepRecord("again", command=["python", "x.py"], exit_codes={0: 1})]
    record.checks = [Check("main: every node exited 0", False, "node1 never ended"), Check("sum", True)]
    record.diagnosis = [{"finding": "rendezvous never completed", "node": 1}]
    return record


def write_run(folder: Path, data) -> None:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(data if isinstance(data, str) else json.dumps(data))


def test_record_round_trips_through_json_and_disk(own_lab_home):
    record = a_record()
    saved = json.loads(json.dumps(record.to_dict()))
    assert saved["schema_version"] == SCHEMA_VERSION and saved["steps"][0]["exit_codes"] == {"0": 0, "1": None}
    assert RunRecord.from_dict(saved) == record
    record.save()
    assert load(record.run_id) == record and load("latest") == record and load("exercise03") == record
    assert (paths.runs_dir() / "latest").resolve() == record.path.resolve()


def test_old_record_without_schema_version_loads(own_lab_home):
    folder = paths.runs_dir() / OLD_EXEC_RECORD["run_id"]
    write_run(folder, OLD_EXEC_RECORD)
    record = load("20240101")
    assert record.schema_version == 1 and record.diagnosis == [] and record.path == folder
    [step] = record.steps
    assert step == StepRecord("main", command=["hostname"], exit_codes={0: 0, 1: 2}, seconds=3.4, oom_killed=[1])
    assert step.expect is None and record.checks == [Check("every node exited 0", False, "exit codes {1: 2}")]
    assert record.status == "failed" and not record.passed and record.error == ""


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"run_id": "x", "steps": [{"no": "name"}]}'])
def test_corrupted_record_is_one_lab_state_error_and_listed_as_unreadable(own_lab_home, text):
    folder = paths.runs_dir() / "20240101-120000-000-exercise01"
    write_run(folder, text)
    with pytest.raises(LabStateError, match="is corrupted") as error:
        load("20240101")
    assert str(folder) in error.value.message and "\n" not in error.value.message
    assert [(run.run_id, run.status) for run in list_runs()] == [(folder.name, "unreadable")]


def test_no_runs_and_unknown_run_are_spec_errors(own_lab_home):
    with pytest.raises(SpecError, match="no runs recorded yet"):
        load("latest")
    a_record().save()
    with pytest.raises(SpecError, match="no run 'nope'"):
        load("nope")


def test_show_prints_expectations_only_where_a_step_has_one(own_lab_home):
    write_run(paths.runs_dir() / OLD_EXEC_RECORD["run_id"], OLD_EXEC_RECORD)
    a_record().save()
    for run, expected in (("exec", "step main: node0=0, node1=2"), ("exercise03", "step main (expect pass):")):
        result = CliRunner().invoke(cli, ["show", run])
        assert result.exit_code == 0, result.output
        assert expected in result.output and "(expect None)" not in result.output
    assert "command: hostname" in CliRunner().invoke(cli, ["show", "exec"]).output
    listed = CliRunner().invoke(cli, ["runs", "--json"])
    assert [run["run_id"] for run in json.loads(listed.output)][0] == OLD_EXEC_RECORD["run_id"]


@pytest.fixture
def no_docker(monkeypatch):
    """Resolution errors must come before any lab is looked up."""
    def refuse(*_):
        raise AssertionError("looked up a lab")

    monkeypatch.setattr(targets.labs, "require", refuse)


@pytest.mark.parametrize("on, nodes, message", [
    ("host", None, "--inventory runs on the inventory's hosts; it does not go with --on host"),
    ("containers", None, "it does not go with --on containers"),
    (None, 3, "--nodes goes with --on host"),
])
def test_conflicting_target_options_are_one_line_errors(tmp_path, no_docker, on, nodes, message):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[nodes]\na\nb\n")
    with pytest.raises(SpecError) as error:
        targets.resolve(on, "default", inventory, nodes)
    assert message in error.value.message and "\n" not in error.value.message
    with pytest.raises(SpecError, match="--nodes goes with --on host"):
        targets.resolve("containers", "default", None, 3)


@pytest.mark.parametrize("command", [["run", "exercise01"], ["exec"], ["torchrun", "x.py"]])
def test_every_job_command_refuses_inventory_with_on_host(tmp_path, no_docker, command):
    options = ["--inventory", str(tmp_path / "hosts.ini"), "--on", "host"]
    result = CliRunner().invoke(cli, [command[0], *options, *command[1:]] + (["--", "hostname"] if command == ["exec"] else []))
    assert isinstance(result.exception, SpecError), result.output
    assert "does not go with --on host" in result.exception.message


def test_inventory_and_host_targets_give_their_facts(tmp_path):
    inventory = tmp_path / "My Hosts.ini"
    inventory.write_text("[nodes]\nn0 ansible_host=10.0.0.1\nn1 ansible_host=10.0.0.2\n")
    real = targets.resolve(None, "default", inventory)
    assert real.hostnames == ("n0", "n1") and real.nnodes == 2 and real.label == "inventory-my-hosts"
    assert real.node_gpus is None and real.transport.master_addr == "10.0.0.1"
    host = targets.resolve("host", "default", nodes=3)
    assert host.nnodes == 3 and host.label == targets.HOST_LABEL and host.transport.master_addr == "127.0.0.1"


def test_driver_is_a_hidden_alias_of_on(no_docker, monkeypatch):
    seen = []

    def resolve(on, name, inventory, nodes):
        seen.append((on, nodes))
        raise SpecError("resolved")

    monkeypatch.setattr(targets, "resolve", resolve)
    for driver, on in (("local", "host"), ("docker", "containers")):
        CliRunner().invoke(cli, ["run", "exercise01", "--driver", driver])
        assert seen.pop() == (on, None)
    CliRunner().invoke(cli, ["run", "exercise01", "--on", "host", "--nodes", "3"])
    assert seen.pop() == ("host", 3)
    clash = CliRunner().invoke(cli, ["run", "exercise01", "--driver", "local", "--on", "containers"])
    assert isinstance(clash.exception, SpecError) and "--driver local means --on host" in clash.exception.message
    for command in ("run", "exec", "torchrun"):
        help_text = CliRunner().invoke(cli, [command, "--help"]).output
        assert "--on [containers|host]" in help_text and "--inventory" in help_text and "--driver" not in help_text


def test_exec_with_the_old_driver_local_runs_host_processes(own_lab_home):
    program = "import os; print('node', os.environ['NODE_RANK'], 'of', os.environ['NNODES'])"
    result = CliRunner().invoke(cli, ["exec", "--driver", "local", "--nodes", "2", "--json", "--",
                                      sys.executable, "-c", program])
    assert result.exit_code == 0, result.output
    record = RunRecord.from_dict(json.loads(result.output[result.output.index("{"):]))
    assert record.lab == targets.HOST_LABEL and record.passed and record.steps[0].exit_codes == {0: 0, 1: 0}
    logs = {node: (record.path / "logs" / f"node{node}-main.log").read_text() for node in (0, 1)}
    assert logs == {0: "node 0 of 2\n", 1: "node 1 of 2\n"}
    assert load(record.run_id).steps[0].command == [sys.executable, "-c", program]


def test_runs_started_in_the_same_millisecond_get_their_own_ids_and_folders(own_lab_home, monkeypatch):
    import lab.analysis.record as record_module

    class FrozenClock:
        @staticmethod
        def now(tz=None):
            return datetime(2026, 11, 23, 12, 0, 0, 123456, tzinfo=tz)

    monkeypatch.setattr(record_module, "datetime", FrozenClock)
    first, second = RunRecord.new("exec", "demo"), RunRecord.new("exec", "demo")
    assert first.run_id == "20261123-120000-123-exec" and second.run_id == "20261123-120000-123-2-exec"
    assert first.path.is_dir() and second.path.is_dir() and first.path != second.path
