"""Every cause the diagnosis names, reproduced for real on a 2-node lab and read back from the run record.

Each run starts one of tests/failures/ the way a user would (`lab exec --copy` or `lab torchrun`) and
checks the record: the top finding's cause, the node and rank it names, that the run ended by itself
(early stop) or at its timeout, and, for a hang, that the stacks of every rank were kept; `lab explain` says the same.
On the shared lab the runs are started by lab's pytest plugin (`lab_cluster`, the job `lab exec`/`lab torchrun`
start, with the CLI's default --fail-grace); on labs of another spec (a memory limit, faults, name lookups kept on
the nodes) by the `lab` command itself, which must exit 1 and print the record with --json.
GPU-only causes (nccl without a GPU, two ranks on one GPU) are covered by tests/unit/test_diagnosis.py.
"""

import json
import signal
import uuid
from pathlib import Path

import pytest

from lab.jobs.launch import FAILED_NODE_GRACE

from .conftest import NAME_PREFIX, lab, lab_json, labelled
from .test_reliability import run_processes, start_lab, wait_for

pytestmark = [pytest.mark.docker]

FAILURES = Path(__file__).parents[1] / "failures"
ENDS_BY_ITSELF = 90  # --timeout for runs that fail on their own: a cap, the early stop ends them well before
HANGS = 45  # --timeout for runs that hang: the lab stops them and keeps every rank's stack
SLACK = 15  # the stop itself: stacks, kills, streams closing
FAST_FAIL = ("PG_TIMEOUT=5",)  # every wait in the scripts, in seconds


def job_args(how: str, lab_name: str, script: str, timeout: int, env=FAST_FAIL, args=(), nproc: int = 1) -> list[str]:
    """The `lab` command line a user would type to run tests/failures/SCRIPT on the lab, asking for the record."""
    common = ["--name", lab_name, "--timeout", str(timeout), "--json",
              *[option for pair in env for option in ("--env", pair)]]
    if how == "exec":
        return ["exec", *common, "--copy", str(FAILURES / script), "--", "python", script, *args]
    return ["torchrun", "--nproc-per-node", str(nproc), *common, str(FAILURES / script), *args]


def run_failing(cluster, how: str, script: str, timeout: int = ENDS_BY_ITSELF, env=FAST_FAIL, args=(),
                nproc: int = 1) -> dict:
    """tests/failures/SCRIPT on the lab_cluster's lab, as `lab exec --copy` or `lab torchrun` runs it: its record, as
    `--json` prints it."""
    variables = dict(pair.split("=", 1) for pair in env)
    if how == "exec":
        result = cluster.exec(["python", script, *args], env=variables, copy=FAILURES / script, timeout=timeout,
                              fail_grace=FAILED_NODE_GRACE)
    else:
        result = cluster.torchrun(FAILURES / script, *args, nproc_per_node=nproc, env=variables, timeout=timeout,
                                  fail_grace=FAILED_NODE_GRACE)
    assert not result.passed, f"{script}: {result!r}\n{result.node_output}"
    return json.loads(json.dumps(result.record.to_dict()))


def run_failing_cli(how: str, lab_name: str, script: str, timeout: int = ENDS_BY_ITSELF, **kwargs) -> dict:
    """The same with the `lab` command on lab `lab_name`: it exits 1 and prints the record."""
    result = lab(*job_args(how, lab_name, script, timeout, **kwargs), timeout=timeout + 180)
    assert result.returncode == 1, f"{script}: exit {result.returncode}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return json.loads(result.stdout)


def assert_diagnosed(record: dict, cause: str, node: int | None, rank: int | None, evidence: str, timeout: int,
                     timed_out: bool = False) -> dict:
    """The record's top finding is `cause` at node/rank, its evidence says `evidence`, and `lab explain` agrees."""
    findings = record["diagnosis"]
    shown = json.dumps(findings, indent=1)
    assert record["status"] == "failed" and findings, shown
    top = findings[0]
    assert (top["cause"], top["node"], top["rank"]) == (cause, node, rank), shown
    assert evidence in top["evidence"], shown
    assert top["title"] and top["fix"], shown
    assert record["seconds"] < timeout + SLACK, record["seconds"]
    assert record["steps"][0]["timed_out"] is timed_out, record["steps"][0]
    assert lab_json("explain", record["run_id"]) == findings
    return top


def assert_stacks_of_every_rank(record: dict, ranks_on_nodes: dict[int, int]) -> list[dict]:
    """stacks/stacks.json of the record holds one worker per rank, on its node (rank -> node)."""
    captured = json.loads((Path(record["path"]) / "stacks" / "stacks.json").read_text())
    workers = sorted((process for process in captured["processes"] if process["role"] == "worker"),
                     key=lambda process: process["rank"])
    assert {worker["rank"]: worker["node"] for worker in workers} == ranks_on_nodes, captured
    assert len(workers) == len(ranks_on_nodes), captured
    return workers


# ---------------------------------------------------------------------------------------------
# Quick: one run each on the shared lab, ending by itself in seconds.


def test_master_addr_localhost_on_two_nodes(lab_cluster):
    record = run_failing(lab_cluster, "exec", "master_addr_localhost.py")
    assert_diagnosed(record, "master-addr-loopback", 1, 1, "node1 rank 1:", ENDS_BY_ITSELF)


def test_one_rank_crashed_while_the_other_waited(lab_cluster):
    record = run_failing(lab_cluster, "exec", "rank_crash.py")
    top = assert_diagnosed(record, "rank-crashed", 1, 1, "node1 rank 1: ValueError: corrupt sample in shard 1",
                           ENDS_BY_ITSELF)
    assert "rank_crash.py:11 in load_batch" in top["evidence"]
    assert "peer-lost" in [finding["cause"] for finding in record["diagnosis"]]  # rank 0's echo, ranked below


def test_shape_mismatch_in_all_reduce(lab_cluster):
    """The size each rank passes is `torch.ones(8 + rank)`: the hooks' record of the call's line lets the diagnosis
    follow the tensor back to its rank (whichever rank's record outlived gloo's abort), before gloo's own words."""
    record = run_failing(lab_cluster, "exec", "shape_mismatch.py")
    findings = record["diagnosis"]
    shown = json.dumps(findings, indent=1)
    assert findings[0]["cause"] == "size-from-rank-data", shown
    assert "all_reduce at shape_mismatch.py:13" in findings[0]["title"], shown
    assert "`gradients = torch.ones(8 + rank)` (line 12)" in findings[0]["title"], shown
    assert "shape-mismatch" in [finding["cause"] for finding in findings], shown
    assert record["seconds"] < ENDS_BY_ITSELF + SLACK and lab_json("explain", record["run_id"]) == findings


def test_world_size_larger_than_launched(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "world_size_too_large.py")
    top = assert_diagnosed(record, "world-size-mismatch", 0, 0, "node0 rank 0:", ENDS_BY_ITSELF)
    assert "the lab launched 2 process(es)" in top["title"]  # 3 expected, or rank 2 awaited


def test_import_error_at_start(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "import_error.py")
    top = assert_diagnosed(record, "import-error", 0, 0, "No module named 'wandb'", ENDS_BY_ITSELF)
    assert "'wandb'" in top["fix"]


# ---------------------------------------------------------------------------------------------
# Failures the nodes explain: the lab asks every node, after the run, about what its errors name.


def test_a_file_written_on_node0_and_read_on_node1(lab_cluster):
    record = run_failing(lab_cluster, "exec", "file_on_one_node.py")
    top = assert_diagnosed(record, "file-on-some-nodes-only", 1, 1, "node0: file, 73 bytes; node1: missing",
                           ENDS_BY_ITSELF)
    assert top["title"].startswith("/tmp/vocab_cache/vocab.json exists on node0 only") and "/lab/shared" in top["fix"]
    probes = record["steps"][0]["probes"]
    assert [node["hostname"] for node in probes["nodes"]] == ["node0", "node1"] and probes["seconds"] < 10


@pytest.mark.slow
@pytest.mark.parametrize("how, script, evidence", [
    ("exec", "filestore_not_shared.py", 'filestore_not_shared.py:12: store = dist.FileStore("/tmp/rendezvous_store"'),
    ("torchrun", "file_init_method_not_shared.py", 'init_method="file:///tmp/rendezvous_file"'),
])
def test_a_rendezvous_file_on_each_nodes_own_disk(lab_cluster, how, script, evidence):
    """The FileStore's path is only in the code (read on the nodes): the timeout names no file."""
    record = run_failing(lab_cluster, how, script)
    top = assert_diagnosed(record, "rendezvous-path-not-shared", 0, 0, evidence, ENDS_BY_ITSELF)
    assert "env://" in top["fix"] and "/lab/shared" in top["fix"]


@pytest.mark.slow
def test_a_package_copy_on_one_node_behind_the_jobs_own_pythonpath(lab_cluster):
    """node1's command sets PYTHONPATH anew (to an older copy of a package): the hooks still run there (the node
    image's venv puts them first itself) and note each package's version and folder."""
    older = ('mkdir -p ~/pylib/tinytok && printf "__version__ = \\"0.9.1\\"\\nVOCAB = 1000\\n" > '
             '~/pylib/tinytok/__init__.py && export PYTHONPATH=~/pylib')
    result = lab_cluster.exec(["bash", "-c", f'if [ "$NODE_RANK" = 1 ]; then {older}; fi; '
                               "exec python package_copy_on_one_node.py"], env=dict(pair.split("=", 1) for pair in
                                                                                    FAST_FAIL),
                              copy=FAILURES / "package_copy_on_one_node.py", timeout=ENDS_BY_ITSELF,
                              fail_grace=FAILED_NODE_GRACE)
    assert not result.passed, result.node_output
    record = json.loads(json.dumps(result.record.to_dict()))
    top = assert_diagnosed(record, "package-version-differs", 1, None, "node1 0.9.1 /root/pylib/tinytok", ENDS_BY_ITSELF)
    assert "remove the other copy from node1" in top["fix"]


@pytest.mark.slow
def test_a_path_no_node_has(lab_cluster):
    record = run_failing(lab_cluster, "exec", "missing_data_path.py")
    top = assert_diagnosed(record, "file-missing-everywhere", 0, 0, "node1: missing", ENDS_BY_ITSELF)
    assert top["fix"].startswith("check the path") and top["evidence"].endswith("/work/shards"), top


@pytest.mark.slow
def test_a_variable_torchrun_sets_read_by_a_script_run_with_lab_exec(lab_cluster):
    record = run_failing(lab_cluster, "exec", "env_not_set.py")
    top = assert_diagnosed(record, "env-not-set", 0, 0, "KeyError: 'RANK'", ENDS_BY_ITSELF)
    assert "lab torchrun" in top["fix"]


@pytest.mark.slow
def test_a_command_the_nodes_do_not_have(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "tool_not_on_nodes.py")
    top = assert_diagnosed(record, "executable-missing", 0, 0, "nvidia-smi missing", ENDS_BY_ITSELF)
    assert top["title"] == "'nvidia-smi' is not on the PATH of any node: the command could not start"


# ---------------------------------------------------------------------------------------------
# Failures that only appear across nodes: the ranks disagree about what they do.


@pytest.mark.slow
def test_a_rank_with_less_data_finishes_while_the_other_waits(lab_cluster):
    record = run_failing(lab_cluster, "exec", "uneven_batches.py")
    top = assert_diagnosed(record, "uneven-collectives", 0, 0, "node1: exit 0", ENDS_BY_ITSELF)
    assert "Join" in top["fix"] and "died" not in top["fix"]
    assert "collectives (Flight Recorder): rank 0 reached #" in top["evidence"], top  # written as each process ended


@pytest.mark.slow
def test_the_ranks_of_a_node_that_finished_early_under_torchrun(lab_cluster):
    """2 processes per node: node0's ranks leave a batch early, node0's torchrun waits for node1's and no node exits 0."""
    record = run_failing(lab_cluster, "torchrun", "uneven_shards_per_node.py", nproc=2)
    top = record["diagnosis"][0]
    assert (top["cause"], top["node"]) == ("uneven-collectives", 1) and top["rank"] in (2, 3), top
    assert top["title"].startswith("rank 0 and rank 1 (node0) finished without an error"), top
    assert "rank 0 reached #" in top["evidence"] and lab_json("explain", record["run_id"]) == record["diagnosis"]
    assert "ended without an error" in lab("explain", record["run_id"]).stdout


@pytest.mark.slow
def test_local_rank_used_as_the_rank_on_two_nodes(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "local_rank_as_rank.py")
    top = assert_diagnosed(record, "duplicate-rank", 0, 0, "keys: /default_pg/0//cpu//0/1", ENDS_BY_ITSELF)
    assert "LOCAL_RANK" in top["fix"] and "MASTER_PORT" not in top["fix"]


@pytest.mark.slow
def test_the_same_node_rank_given_on_both_nodes(lab_cluster):
    record = run_failing(lab_cluster, "exec", "repeated_node_rank.py", args=("--node-rank", "0", "--nnodes", "{nnodes}"))
    top = assert_diagnosed(record, "duplicate-rank", 0, 0, "keys: /default_pg/0//cpu//0/1", ENDS_BY_ITSELF)
    assert "{node_rank}" in top["fix"]


@pytest.mark.slow
def test_ranks_a_script_spawned_from_0_on_every_node(lab_cluster):
    record = run_failing(lab_cluster, "exec", "spawn_without_node_offset.py")
    top = assert_diagnosed(record, "duplicate-rank", 0, 0, "keys: /default_pg/0//cpu//0/2", ENDS_BY_ITSELF)
    # four wait lines ("all 4 processes"), or, where mp.spawn ended a sibling before it printed its own, the hooks'
    # records of the processes still in init_process_group under one rank
    assert "node_rank * K + index" in top["fix"] and "claim the same rank" in top["title"]


@pytest.mark.slow
def test_a_rank_alive_but_late_to_the_rendezvous(lab_cluster):
    record = run_failing(lab_cluster, "exec", "late_rank.py")
    top = assert_diagnosed(record, "late-rank", 1, 1, "in load_index at", ENDS_BY_ITSELF)
    assert "timeout" in top["fix"]


@pytest.mark.slow
def test_a_rank_late_to_a_collective_in_the_middle_of_training(lab_cluster):
    """Rank 1 reloads a shard for 6 x PG_TIMEOUT at step 3; rank 0 gives up in all_reduce: its stack says where
    rank 1 was."""
    record = run_failing(lab_cluster, "exec", "slow_rank_mid_training.py")
    top = assert_diagnosed(record, "late-rank", 1, 1, "in reload_shard at", ENDS_BY_ITSELF)
    assert "gave up waiting for it in all_reduce" in top["title"] and "timeout" in top["fix"]


@pytest.mark.slow
def test_a_late_rank_under_torchrun_that_its_agent_ended(lab_cluster):
    """2 processes per node: rank 1 shares node0 with rank 0, so when rank 0 gives up, node0's torchrun ends rank 1
    with SIGTERM at once, before the lab looks; the stack rank 1 wrote as the signal came says where it was."""
    record = run_failing(lab_cluster, "torchrun", "slow_rank_mid_training.py", nproc=2)
    top = assert_diagnosed(record, "late-rank", 0, 1, "in reload_shard at", ENDS_BY_ITSELF)
    assert "gave up waiting for it in all_reduce" in top["title"]
    summary = (Path(record["path"]) / "stacks" / "summary.txt").read_text()
    assert "rank 1 node0: not in a distributed call (slow_rank_mid_training.py:13) (its stack as torchrun ended it)" \
        in summary, summary


@pytest.mark.slow
@pytest.mark.parametrize("how, script, node, rank, collective", [
    ("torchrun", "late_past_the_timeout.py", 1, 1, "#1 all_gather"),
    ("exec", "checkpoint_past_the_timeout.py", 0, 0, "#5 all_reduce"),
])
def test_a_rank_that_got_to_a_collective_after_the_others_gave_up(lab_cluster, how, script, node, rank, collective):
    """The late rank arrives 1.5-2 x PG_TIMEOUT after the other entered (before DDP's first collective; after rank 0's
    checkpoint copy between epochs) and finds it gone: no stack of where it was, the Flight Recorders' times say it."""
    record = run_failing(lab_cluster, how, script)
    top = assert_diagnosed(record, "late-rank", node, rank, f"entered {collective}", ENDS_BY_ITSELF)
    assert "was alive but late: it reached " + collective in top["title"] and "timeout" in top["fix"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exec", "torchrun"])
def test_a_rank_that_got_to_the_rendezvous_after_the_other_gave_up(lab_cluster, how):
    """Rank 1 joins 2 x PG_TIMEOUT late and dials a store that went away with rank 0 (or node0's agent): still
    dialling when the lab stops the run (its stack), or given up on its own after node0 ended (c10d's line)."""
    record = run_failing(lab_cluster, how, "late_join_past_the_timeout.py")
    top = assert_diagnosed(record, "late-rank", 1, 1, "node0", ENDS_BY_ITSELF)
    assert "was alive but late" in top["title"] and "join_timeout" in top["fix"]


@pytest.mark.slow
def test_ranks_that_ran_different_numbers_of_collectives_before_one_are_out_of_step(lab_cluster):
    """Micro-batches packed per rank (2 per node): gloo reports sizes that differ; the recorders show other calls."""
    record = run_failing(lab_cluster, "torchrun", "uneven_micro_batches.py", nproc=2)
    findings = record["diagnosis"]
    assert findings[0]["cause"] == "collective-mismatch", json.dumps(findings, indent=1)
    assert findings[0]["title"].startswith("the ranks are out of step: at #7 ")
    assert "shape-mismatch" not in [finding["cause"] for finding in findings]


@pytest.mark.slow
def test_a_rendezvous_on_a_port_another_service_holds(lab_cluster):
    record = run_failing(lab_cluster, "exec", "rendezvous_on_a_service_port.py")
    top = assert_diagnosed(record, "wrong-service-on-port", 1, 1, "invalid value returned from server",
                           ENDS_BY_ITSELF)
    assert "sshd's" in top["title"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exec", "torchrun"])
def test_ddp_parameters_without_a_gradient(lab_cluster, how):
    record = run_failing(lab_cluster, how, "ddp_unused_parameter.py", env=(*FAST_FAIL, "TORCH_DISTRIBUTED_DEBUG=INFO"))
    top = assert_diagnosed(record, "ddp-unused-parameters", 0, 0, "Expected to have finished reduction", ENDS_BY_ITSELF)
    assert "aux_head.bias, aux_head.weight" in top["title"] and "find_unused_parameters=True" in top["fix"]


def test_a_metric_all_reduced_in_a_tensor_nobody_keeps(lab_cluster):
    """The hooks in each node see the all_reduce given a tensor made for the call; the script's own check raises."""
    record = run_failing(lab_cluster, "torchrun", "metrics_reduced_in_a_temporary.py")
    top = assert_diagnosed(record, "collective-result-discarded", 0, 0, "ranks disagree on the validation loss",
                           ENDS_BY_ITSELF)
    assert "all_reduce at metrics_reduced_in_a_temporary.py:19" in top["title"] and "ranks 0, 1" in top["title"]


@pytest.mark.slow
def test_ddp_models_that_differ_between_ranks(lab_cluster):
    record = run_failing(lab_cluster, "exec", "ddp_model_mismatch.py")
    top = assert_diagnosed(record, "ddp-parameter-mismatch", 1, 1, "appears not to match sizes", ENDS_BY_ITSELF)
    assert "[32, 8]" in top["title"]


@pytest.mark.slow
def test_shared_memory_that_runs_out(lab_cluster):
    record = run_failing(lab_cluster, "exec", "shared_memory_full.py")
    top = assert_diagnosed(record, "shared-memory-exhausted", 0, 0, "unable to allocate shared memory",
                           ENDS_BY_ITSELF)
    assert "/dev/shm" in top["title"]


@pytest.mark.slow
def test_shared_memory_filled_by_a_segment_from_before_the_run(lab_cluster):
    """A killed job's segment fills node1's /dev/shm; a job whose 200 MB fit node0's then fails on node1 only, and the
    nodes' answers after the run name the segment."""
    leftover = "/dev/shm/torch_4711_leftover_0"
    made = lab_cluster.exec(["bash", "-c", f"fallocate -l 400M {leftover}"], nodes=[1])
    assert made.passed, made.node_output
    try:
        record = run_failing(lab_cluster, "exec", "shared_memory_full.py", env=("BATCH_FLOATS=50000000",))
        top = assert_diagnosed(record, "shared-memory-exhausted", 1, 1, "unable to allocate shared memory",
                               ENDS_BY_ITSELF)
        assert "older than the job's processes" in top["title"] and f"rm {leftover}" in top["fix"], top
    finally:
        lab_cluster.exec(["rm", "-f", leftover], nodes=[1])


# ---------------------------------------------------------------------------------------------
# Slow: the rest of the causes on the shared lab.


@pytest.mark.slow
def test_nothing_listens_on_the_port_a_rank_dials(lab_cluster):
    record = run_failing(lab_cluster, "exec", "master_port_closed.py")
    top = assert_diagnosed(record, "master-unreachable", 1, 1, "node1 rank 1:", ENDS_BY_ITSELF)
    assert "this rank dialled" in top["fix"], top  # the rule saw rank 1 dial another port than the lab's


@pytest.mark.slow
def test_master_port_already_in_use(lab_cluster):
    record = run_failing(lab_cluster, "exec", "master_port_in_use.py")
    assert_diagnosed(record, "master-port-in-use", 0, 0, "node0 rank 0:", ENDS_BY_ITSELF)


@pytest.mark.slow
def test_socket_ifname_names_a_missing_interface(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "socket_ifname_missing.py")
    top = assert_diagnosed(record, "socket-ifname-missing", 0, 0, "Unable to find address for: ib0", ENDS_BY_ITSELF)
    assert top["title"].startswith("GLOO_SOCKET_IFNAME") and "GLOO_SOCKET_IFNAME" in top["fix"]


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exec", "torchrun"])
def test_destroy_process_group_without_init(lab_cluster, how):
    record = run_failing(lab_cluster, how, "destroy_without_init.py")
    assert_diagnosed(record, "process-group-not-initialized", 0, 0, "node0 rank 0:", ENDS_BY_ITSELF)


@pytest.mark.slow
def test_bad_arguments_on_the_launch_line(lab_cluster):
    record = run_failing(lab_cluster, "exec", "bad_arguments.py", args=("--batch_size", "64"))
    top = assert_diagnosed(record, "bad-arguments", 0, 0, "unrecognized arguments: --batch_size 64", ENDS_BY_ITSELF)
    assert "unrecognized arguments" in top["title"]


@pytest.mark.slow
def test_rank_crash_under_torchrun(lab_cluster):
    record = run_failing(lab_cluster, "torchrun", "rank_crash.py")
    assert_diagnosed(record, "rank-crashed", 1, 1, "node1 rank 1: ValueError: corrupt sample in shard 1",
                     ENDS_BY_ITSELF)


@pytest.mark.slow
def test_ranks_stuck_in_different_collectives_hang_until_the_timeout(lab_cluster):
    """Rank 0 skips a barrier the other calls: with a long process-group timeout the job hangs; the lab stops it
    at --timeout with the stack of every rank, which shows where each one waits."""
    record = run_failing(lab_cluster, "exec", "collective_mismatch.py", timeout=HANGS, env=("PG_TIMEOUT=300",))
    top = assert_diagnosed(record, "collective-mismatch", 0, 0, "rank 0 (node0) waits in #1 all_reduce float[1]", HANGS,
                           timed_out=True)
    assert "rank 1 (node1) waits in #1 barrier (collective_mismatch.py:17)" in top["evidence"], top
    live = sorted(path.name.split("-pid")[0] for path in (Path(record["path"]) / "stacks" / "flight").glob("live-*"))
    assert live == ["live-node0", "live-node1"]  # each rank wrote its Flight Recorder before the lab stopped it
    explained = lab("explain", record["run_id"]).stdout
    assert "rank 1 node1; stopped by the lab; waits in barrier (collective_mismatch.py:17); in #1 barrier" in explained
    workers = assert_stacks_of_every_rank(record, {0: 0, 1: 1})
    assert [worker["summary"].split(" (")[0] for worker in workers] == ["rank 0 node0: all_reduce",
                                                                       "rank 1 node1: barrier"]


@pytest.mark.slow
def test_a_world_size_argument_larger_than_the_launch_hangs_until_the_timeout(lab_cluster):
    """world_size=3 from the command line, init_process_group's default timeout: nothing fails before the lab's
    --timeout; what each process passed is read from its stack."""
    hangs = 25  # init_process_group waits from the start: no need to let the job get going first
    record = run_failing(lab_cluster, "exec", "world_size_argument.py", timeout=hangs, env=(), args=("--world-size", "3"))
    top = assert_diagnosed(record, "world-size-mismatch", 0, 0, "init_process_group(rank=0, world_size=3)", hangs,
                           timed_out=True)
    assert "init_process_group(rank=1, world_size=3)" in top["evidence"] and "world_size=2" in top["fix"]


# ---------------------------------------------------------------------------------------------
# Slow, on a lab of their own: name resolution kept on the nodes, a memory limit, node faults.


# One worker for the tests on spare_lab under pytest-xdist: a module's lab is made again on a worker whose next test
# is of another module.
ON_SPARE_LAB = pytest.mark.xdist_group("spare_lab")


@pytest.fixture(scope="module")
def spare_lab():
    """A 2-node lab with 1 GiB per node, for what would disturb the shared lab (faults, OOM kills)."""
    name = f"{NAME_PREFIX}{uuid.uuid4().hex[:6]}"
    lab_json("up", "--nodes", "2", "--memory", "1g", "--name", name)
    yield name
    lab("down", "--name", name)


# Run as root in a node: the peers into /etc/hosts (Docker's embedded DNS answers for the lab's own names),
# then a resolver on the node's own loopback, where nothing listens. An unknown name then fails there and
# then, instead of being forwarded by Docker's embedded DNS to the host's resolver, outside this machine.
LOCAL_DNS = ("getent hosts {peers} > /tmp/peers && cat /tmp/peers >> /etc/hosts "
             "&& printf 'nameserver 127.0.0.1\\n' > /etc/resolv.conf && cat /etc/resolv.conf && getent hosts {peers}")


def keep_name_lookups_on_the_nodes(client, lab_name: str) -> None:
    containers = labelled(client, lab_name)[0]
    peers = " ".join(f"node{container.labels['io.lab.node']}" for container in containers)
    for container in containers:
        code, output = container.exec_run(["sh", "-c", LOCAL_DNS.format(peers=peers)], user="root")
        resolver, *resolved = output.decode().splitlines()
        assert code == 0 and resolver == "nameserver 127.0.0.1", output
        assert {line.split()[-1] for line in resolved} == set(peers.split()), output


@pytest.mark.slow
def test_master_addr_that_does_not_resolve(client, fresh_name):
    """On a lab of its own: its nodes' name lookups stay changed (a node restarted by a fault would not resolve)."""
    lab_json("up", "--nodes", "2", "--name", fresh_name)
    keep_name_lookups_on_the_nodes(client, fresh_name)  # never send the lookup of a typo outside this machine
    record = run_failing_cli("exec", fresh_name, "master_addr_unresolvable.py")
    top = assert_diagnosed(record, "master-addr-unresolvable", 0, 0, "(nodee0, ", ENDS_BY_ITSELF)
    assert "'nodee0'" in top["title"] and "node0" in top["fix"]


@pytest.mark.slow
@ON_SPARE_LAB
def test_process_killed_for_memory(spare_lab):
    record = run_failing_cli("torchrun", spare_lab, "out_of_memory.py", env=())
    killed = record["diagnosis"][0]["node"]  # both ranks leak alike: either node may hit its limit first
    assert killed in record["steps"][0]["oom_killed"], record["steps"][0]
    top = assert_diagnosed(record, "out-of-memory", killed, killed, "exitcode: -9", ENDS_BY_ITSELF)
    assert "1 GiB" in top["title"]


@pytest.mark.slow
@ON_SPARE_LAB
@pytest.mark.parametrize("fault, state", [("kill", "killed"), ("pause", "paused"), ("partition", "partitioned")])
def test_node_broken_by_a_lab_fault_during_a_job(client, spare_lab, fault, state):
    job = start_lab(*job_args("exec", spare_lab, "training_loop.py", ENDS_BY_ITSELF))
    try:
        wait_for(lambda: job.poll() is not None or all(run_processes(client, spare_lab).values()),
                 what="the job running on both nodes")
        assert job.poll() is None, job.communicate()
        lab("fault", fault, "node1", "--name", spare_lab, check=True)
        stdout, stderr = job.communicate(timeout=ENDS_BY_ITSELF + 180)
    finally:
        if job.poll() is None:
            job.send_signal(signal.SIGINT)
            job.communicate(timeout=60)
        lab("fault", "heal", "node1", "--name", spare_lab, check=True)
    assert job.returncode == 1, stderr
    record = json.loads(stdout)
    top = assert_diagnosed(record, "lab-fault", 1, 1, f"'{state}' on node1", ENDS_BY_ITSELF)
    assert f"fault '{state}'" in top["title"]


# ---------------------------------------------------------------------------------------------
# Failures told apart by what every rank was doing (each rank's pending call with its arguments, how each process
# ended), not by a message of their own.


@pytest.mark.slow
@pytest.mark.parametrize("script, cause, node, rank, says", [
    ("p2p_deadlock.py", "p2p-deadlock", 0, 0, "rank 0 waits to receive from rank 1, rank 1 waits to receive from rank 0"),
    ("p2p_tag_mismatch.py", "p2p-mismatch", 0, 0, "tag"),
    ("broadcast_root_differs.py", "root-mismatch", None, None, "root"),
    ("native_crash.py", "fatal-signal", 1, 1, "SIGSEGV"),
    ("store_key_typo.py", "store-key-never-set", 1, 1, "'dataset/ready-epoch-0'"),
    ("dataloader_worker_stuck.py", "dataloader-worker-stuck", 1, 1, "ShardDataset.__getitem__"),
])
def test_failures_told_apart_by_what_every_rank_was_doing(lab_cluster, script, cause, node, rank, says):
    record = run_failing(lab_cluster, "torchrun", script)
    top = record["diagnosis"][0]
    named = (top["node"], top["rank"]) if node is not None else (None, None)  # each root took itself for the root
    assert (top["cause"], *named) == (cause, node, rank), json.dumps(record["diagnosis"], indent=1)
    assert says in top["title"], top
    assert lab_json("explain", record["run_id"]) == record["diagnosis"]

