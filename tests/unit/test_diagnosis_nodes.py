"""The nodes differ, or lack what the job names: rules read what every node answered after the run (the record's
`probes`), on real records of tests/failures/ scripts run on a 2-node lab (tests/unit/diagnosis_samples/<script>/),
each with cases where it must not fire (the same record with other answers)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from lab.analysis.diagnosis import Evidence, NodeProbes, diagnose
from lab.analysis.diagnosis.nodes import MAX_PATHS, questions
from lab.analysis.record import StepRecord
from tools.docs_reference import load_evidence

SAMPLES = Path(__file__).parent / "diagnosis_samples"


def recorded(name: str) -> dict:
    return json.loads((SAMPLES / name / "run.json").read_text())


def sample(name: str, probes: dict | None | str = "recorded", **changes) -> Evidence:
    """The record's evidence as explain.py builds it, its probes as saved (or `probes` instead; None: not asked)."""
    if probes != "recorded":
        changes["probes"] = NodeProbes.from_dict(probes)
    return replace(load_evidence(SAMPLES / name), **changes)


def causes(evidence: Evidence) -> list[str]:
    return [finding.cause for finding in diagnose(evidence)]


def answers_changed(name: str, change) -> dict:
    """The record's probes with `change(node_answer)` applied to every node's answer (a copy)."""
    probes = json.loads(json.dumps(recorded(name)["probes"]))
    for node in probes["nodes"]:
        change(node)
    return probes


def test_a_file_written_on_node0_and_read_on_node1_is_on_node0_only():
    found = diagnose(sample("file_on_one_node"))[0]
    assert (found.cause, found.node, found.rank) == ("file-on-some-nodes-only", 1, 1)
    assert found.title.startswith("/tmp/vocab_cache/vocab.json exists on node0 only: each node has its own disk")
    assert "node0: file, 73 bytes; node1: missing (its folder too; /tmp exists)" in found.evidence
    assert "/lab/shared" in found.fix and "broadcast_object_list" in found.fix


def test_without_the_nodes_answers_it_stays_a_crash():
    """A record from before the lab asked the nodes: the crash finding, as it was."""
    assert causes(sample("file_on_one_node", probes=None))[0] == "rank-crashed"


@pytest.mark.parametrize("has_it", [True, False], ids=["on every node", "on no node"])
def test_a_file_on_every_node_or_on_none_is_not_on_some_nodes_only(has_it):
    def change(node):
        facts = node["paths"]["/tmp/vocab_cache/vocab.json"]
        facts.update(kind="file", size=73, parent=True) if has_it else facts.update(kind=None, size=None)

    found = causes(sample("file_on_one_node", answers_changed("file_on_one_node", change)))
    assert "file-on-some-nodes-only" not in found
    assert ("file-missing-everywhere" in found) is (not has_it)  # on every node now: read before it was written


def test_a_path_no_node_has_names_the_nearest_one():
    found = diagnose(sample("missing_data_path"))[0]
    assert found.cause == "file-missing-everywhere" and found.title.endswith("is on no node: a wrong path, or the step "
                                                                             "that makes it did not run")
    assert "/shard/0.pt" in found.title and found.evidence.endswith("/work/shards")
    assert "the nearest name there is" in found.fix
    assert "file-on-some-nodes-only" not in causes(sample("missing_data_path"))


def test_a_path_one_node_lacks_on_the_shared_folder_is_not_called_missing_everywhere():
    """node0 has it: not everywhere missing, whatever the folder."""
    def change(node):
        if node["node"] == 0:
            for facts in node["paths"].values():
                facts.update(kind="file", size=10)

    found = causes(sample("missing_data_path", answers_changed("missing_data_path", change)))
    assert found[0] == "file-on-some-nodes-only" and "file-missing-everywhere" not in found


@pytest.mark.parametrize("name, path, where", [
    ("filestore_not_shared", "/tmp/rendezvous_store", "filestore_not_shared.py:12: store = dist.FileStore("),
    ("file_init_method_not_shared", "/tmp/rendezvous_file", 'init_method="file:///tmp/rendezvous_file"'),
])
def test_a_rendezvous_file_on_each_nodes_own_disk(name, path, where):
    """A FileStore (its path only in the code: read on the node) or a file:// init_method on /tmp, both timing out."""
    found = diagnose(sample(name))[0]
    assert (found.cause, found.node, found.rank) == ("rendezvous-path-not-shared", 0, 0)
    assert found.title.startswith(f"the rendezvous file {path} is on each node's own disk")
    assert where in found.evidence and "RuntimeError: Wait timeout" in found.evidence
    assert "file:///lab/shared/rendezvous-" in found.fix and "env://" in found.fix


@pytest.mark.parametrize("shared", [["/lab/shared", "/tmp"], ["/"]], ids=["on a shared folder", "one host"])
def test_a_rendezvous_file_on_a_shared_folder_is_not_blamed(shared):
    probes = {**recorded("filestore_not_shared")["probes"], "shared": shared}
    assert "rendezvous-path-not-shared" not in causes(sample("filestore_not_shared", probes))


def test_a_rendezvous_path_in_the_code_of_a_run_that_failed_elsewhere_is_not_blamed():
    """The same answers, but the run failed after it met its peers (no rendezvous in its tracebacks, no hang)."""
    evidence = sample("filestore_not_shared")
    evidence.nodes = [replace(node, lines=["ValueError: bad batch"]) for node in evidence.nodes]
    assert "rendezvous-path-not-shared" not in causes(evidence)


def test_a_variable_torchrun_sets_read_under_lab_exec():
    found = diagnose(sample("env_not_set"))[0]
    assert (found.cause, found.node, found.rank) == ("env-not-set", 0, 0)
    assert found.title == "RANK is not set on any node: the job read it from the environment"
    assert "lab torchrun" in found.fix and "NODE_RANK" in found.fix


def test_a_variable_set_on_node0_only_differs_between_nodes():
    found = diagnose(sample("env_not_set", answers_changed("env_not_set", lambda node: node["env"].update(
        RANK=node["node"] == 0))))[0]
    assert found.cause == "env-differs-between-nodes" and found.title.startswith("RANK is set on node0 only")
    assert "--env RANK=" in found.fix


@pytest.mark.parametrize("change", [lambda node: node["env"].update(RANK=True),
                                   lambda node: node.update(env={})], ids=["set on every node", "not asked"])
def test_a_variable_every_node_has_or_nobody_asked_about_is_no_finding(change):
    found = causes(sample("env_not_set", answers_changed("env_not_set", change)))
    assert not {"env-not-set", "env-differs-between-nodes"} & set(found) and found[0] == "rank-crashed"


def test_a_variable_the_launcher_gives_is_not_missing():
    """Under torchrun the probe (not a torchrun worker) lacks RANK; torchrun's workers have it."""
    probes = {**recorded("env_not_set")["probes"], "launcher_env": ["RANK", "WORLD_SIZE"]}
    assert "env-not-set" not in causes(sample("env_not_set", probes))


@pytest.mark.parametrize("name, command", [("tool_not_on_nodes", "nvidia-smi"), ("command_not_found_exec", "nosuchcmd"),
                                           ("command_not_found_shell", "nosuch2")])
def test_a_command_no_node_has(name, command):
    """From a subprocess call's FileNotFoundError, docker exec's refusal, and sh's 'not found'."""
    found = diagnose(sample(name))[0]
    assert found.cause == "executable-missing" and found.title == (f"'{command}' is not on the PATH of any node: the "
                                                                    "command could not start")
    assert "python -> /opt/lab-venv/bin/python" in found.evidence and "full path" in found.fix


def test_a_command_on_some_nodes_only_says_which():
    def change(node):
        node["commands"]["nvidia-smi"] = "/usr/bin/nvidia-smi" if node["node"] == 1 else None

    found = diagnose(sample("tool_not_on_nodes", answers_changed("tool_not_on_nodes", change)))[0]
    assert found.title.startswith("'nvidia-smi' is not on the PATH of node0 only")
    assert "install nvidia-smi on node0 as on node1" in found.fix


def test_a_command_every_node_has_is_no_finding():
    found = causes(sample("tool_not_on_nodes", answers_changed(
        "tool_not_on_nodes", lambda node: node["commands"].update({"nvidia-smi": "/usr/bin/nvidia-smi"}))))
    assert "executable-missing" not in found and found[0] == "rank-crashed"


def test_python_missing_names_the_interpreter_the_lab_found():
    """`sh -c "python ..."` on an image with python3 only."""
    evidence = sample("command_not_found_shell", answers_changed("command_not_found_shell", lambda node: node.update(
        python="/usr/bin/python3", commands={"python": None, "python3": "/usr/bin/python3"})))
    evidence.nodes = [replace(node, lines=["sh: 1: python: not found"]) for node in evidence.nodes]
    found = diagnose(evidence)[0]
    assert found.cause == "executable-missing" and "/usr/bin/python3" in found.fix and "lab exec -- python" in found.fix


def test_what_to_ask_comes_from_the_runs_own_words():
    lines = [*(SAMPLES / "file_on_one_node" / "node1.log").read_text().splitlines(),
             *(SAMPLES / "env_not_set" / "node0.log").read_text().splitlines(),
             'OCI runtime exec failed: exec failed: unable to start container process: exec: "deepspeed": '
             "executable file not found in $PATH: unknown", "cat: /data/x.bin: No such file or directory"]
    asked = questions(lines, ["python", "train.py", "--init", "file:///tmp/rdzv"])
    assert asked.paths == ["/tmp/rdzv", "/tmp/vocab_cache/vocab.json", "/data/x.bin"]
    assert asked.commands == ["python", "python3", "deepspeed"] and asked.env == ["RANK"]
    assert asked.scripts == ["train.py"]


def test_what_to_ask_is_bounded():
    asked = questions([f"FileNotFoundError: [Errno 2] No such file or directory: '/data/{index}'"
                       for index in range(50)])
    assert len(asked.paths) == MAX_PATHS


def test_the_answers_are_kept_in_the_step_record():
    probes = recorded("file_on_one_node")["probes"]
    step = StepRecord.from_dict(json.loads(json.dumps(StepRecord("main", probes=probes).to_dict())))
    assert NodeProbes.from_dict(step.probes).to_dict() == NodeProbes.from_dict(probes).to_dict()
    assert StepRecord.from_dict({"step": "main"}).probes is None  # records from before


def test_lab_explain_shows_what_the_nodes_answered():
    from lab.analysis.diagnosis.nodes import format_probes

    shown = format_probes(NodeProbes.from_dict(recorded("file_on_one_node")["probes"]))
    assert shown.splitlines()[1:] == [
        "  /tmp/vocab_cache/vocab.json: node0 file, 73 bytes; node1 missing (its folder too; /tmp exists)"]
    assert format_probes(NodeProbes.from_dict(recorded("env_not_set")["probes"])).endswith("$RANK: set on no node")


def test_a_script_on_no_node_stays_script_not_found_and_one_on_node0_only_is_named():
    """`python x.py` where no node has x.py: not copied (script-not-found's fix says how); on node0 only: the disks."""
    def answers(node0_has_it: bool) -> dict:
        return {"shared": ["/lab/shared"], "nodes": [
            {"node": node, "paths": {"/work/x.py": {"path": "/work/x.py", "absolute": "/work/x.py",
                                                    "kind": "file" if node0_has_it and node == 0 else None}}}
            for node in (0, 1)]}

    evidence = sample("command_not_found_shell", answers(False))
    evidence.nodes = [replace(node, lines=["/opt/lab-venv/bin/python: can't open file '/work/x.py': [Errno 2] No such "
                                           "file or directory"]) for node in evidence.nodes]
    assert causes(evidence)[0] == "script-not-found"
    evidence.probes = NodeProbes.from_dict(answers(True))
    assert causes(evidence)[:2] == ["file-on-some-nodes-only", "script-not-found"]


def test_a_getenv_that_returned_none_names_the_variable():
    """`int(os.getenv("SHARD_INDEX"))` failing with a TypeError about NoneType: the source line says which variable."""
    found = diagnose(sample("getenv_none"))[0]
    assert (found.cause, found.title) == ("env-not-set", "SHARD_INDEX is not set on any node: the job read it from "
                                                         "the environment")
    assert "--env SHARD_INDEX=VALUE" in found.fix


def test_a_none_that_did_not_come_from_the_environment_is_no_env_finding():
    """The same TypeError, but the source line reads no variable (a function that returned None)."""
    evidence = sample("getenv_none")
    evidence.nodes = [replace(node, lines=[line.replace('os.getenv("SHARD_INDEX")', "lookup_shard()")
                                           for line in node.lines]) for node in evidence.nodes]
    assert not {"env-not-set", "env-differs-between-nodes"} & set(causes(evidence))


def test_the_fix_for_a_torchrun_variable_gives_its_lab_exec_placeholder():
    assert "--env RANK={rank}" in diagnose(sample("env_not_set"))[0].fix


def test_a_missing_folder_whose_name_differs_from_the_one_made_only_in_digits_is_a_clock_made_name():
    """The third batch's run_dir_local_time: the run folder is named from the local hour, and node1 has another time
    zone: it looks for runs/20261125-18 where node0 made runs/20261125-23."""
    found = diagnose(sample("run_dir_local_time"))[0]
    assert (found.cause, found.rank) == ("file-missing-everywhere", 1)
    assert "came out as 20261125-18 here and as 20261125-23" in found.title and "UTC" in found.fix


def test_a_missing_path_whose_nearest_name_differs_in_letters_is_not_a_clock_made_name():
    def change(node):
        for facts in node["paths"].values():
            if facts.get("close"):
                facts["close"] = facts["close"].replace("20261125-23", "latest")
    found = diagnose(sample("run_dir_local_time", answers_changed("run_dir_local_time", change)))[0]
    assert found.cause == "file-missing-everywhere" and "came out as" not in found.title


def test_a_file_rendezvous_the_code_builds_at_run_time_is_read_from_what_init_process_group_was_given():
    """fifth_file_init_tmp: init_method=f"file://{INIT_FILE}" (a name no scan of the code resolves). Its record was
    made with hooks that did not yet keep init_method: here each rank's call is given what they keep now."""
    evidence = load_evidence(SAMPLES / "fifth_file_init_tmp")
    assert diagnose(evidence)[0].cause != "rendezvous-path-not-shared"

    def given(trace):
        calls = tuple(replace(call, args=(("init_method", "file:///tmp/ddp_rendezvous"),))
                      if call.op == "init_process_group" else call for call in trace.calls.failed)
        return replace(trace, calls=replace(trace.calls, failed=calls)) if trace.calls else trace

    found = diagnose(replace(evidence, traces=[given(trace) for trace in evidence.traces]))[0]
    assert found.cause == "rendezvous-path-not-shared" and "/tmp/ddp_rendezvous" in found.title
    assert "env://" in found.fix
