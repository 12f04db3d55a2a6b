"""The run timeline: rows per node and rank from the record, and timeline.png from real local runs."""

import json
import sys

import pytest

from lab.analysis.record import RunRecord, StepRecord, load
from lab.analysis.stacks import Frame, ProcessStack, ThreadStack, write_stacks
from lab.analysis.timeline import FAILED, KILLED, OK, build_timeline, draw_timeline, exit_text
from lab.jobs.runner import RunOptions, run_exercise
from lab.jobs.targets import Target

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from test_labkit_finish import free_port  # noqa: E402
from test_runner_local import JOIN, Collect, exercise  # noqa: E402

T0 = 1_700_000_000.0
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def host_nodes(transport, nnodes: int = 2) -> Target:
    """`nnodes` nodes that are process groups on this host, as `lab run --on host` makes them."""
    return Target(transport, ("localhost",) * nnodes, "local")


def events(folder, rank, node, pid, *moments):
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"events-rank{rank}.jsonl").open("a") as handle:
        for name, when in moments:
            handle.write(json.dumps({"event": name, "time": T0 + when, "rank": rank, "node_rank": node, "pid": pid})
                         + "\n")


def waiting_stack(node, rank):
    frames = [Frame("<module>", "/lab/shared/train.py", 12, "train.py"),
              Frame("all_reduce", "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", 2500,
                    "torch/distributed/distributed_c10d.py")]
    return ProcessStack(node, 4000 + rank, "worker", rank, rank % 2, {"RANK": str(rank)},
                        [ThreadStack("MainThread", 1, True, frames)])


@pytest.fixture
def hung_record(own_lab_home):
    """2 nodes x 2 under torchrun: rank 3 died with SIGKILL, the others waited in all_reduce until the timeout."""
    record = RunRecord.new("exercise03", "t1")
    step = StepRecord("main", expect="pass", exit_codes={0: None, 1: 1}, timed_out=True, seconds=30,
                      nproc_per_node=2, master_port=29500, started_at=T0, node_exits={0: T0 + 30.5, 1: T0 + 9},
                      stopped_at=T0 + 30)
    record.steps, record.status = [step], "failed"
    results = record.path / "results" / "main"
    for rank in range(4):
        events(results, rank, rank // 2, 100 + rank, ("started", 1), ("init", 3), ("pg_ready", 4), ("step", 5),
               ("step", 7))
    (record.path / "logs").mkdir(parents=True)
    (record.path / "logs" / "node0-main.log").write_text("training\n")
    (record.path / "logs" / "node1-main.log").write_text(
        "Root Cause (first observed failure):\n[0]:\n  time      : 2024\n  host      : node1\n"
        "  rank      : 3 (local_rank: 1)\n  exitcode  : -9 (pid: 103)\n")
    write_stacks([waiting_stack(0, 0), waiting_stack(0, 1), waiting_stack(1, 2)], record.run_id, record.stacks_dir)
    record.save()
    return record


def test_exit_text_names_signals_both_ways():
    assert exit_text(0) == "exit 0" and exit_text(1) == "exit 1"
    assert exit_text(-9) == "SIGKILL" and exit_text(137) == "exit 137 (SIGKILL)"
    assert exit_text(None) == "stopped by the lab" and exit_text(-99) == "signal 99"


def test_hung_run_shows_who_waited_and_who_was_gone(hung_record):
    timeline = build_timeline(load(hung_record.run_id))
    rows = {row.label: row for row in timeline.rows}
    assert [row.label for row in timeline.rows] == ["node0", "rank 0", "rank 1", "node1", "rank 2", "rank 3"]
    gone = rows["rank 3"].spans[0]
    assert (gone.outcome, gone.label, gone.end) == (FAILED, "SIGKILL", T0 + 9)  # torchrun's report, the node's exit
    for waited in ("rank 0", "rank 1", "rank 2"):
        span = rows[waited].spans[0]
        assert (span.outcome, span.label, span.start, span.end) == (KILLED, "waiting in all_reduce", T0 + 1, T0 + 30)
    assert rows["node1"].spans[0].outcome == FAILED and rows["node1"].spans[0].label == "exit 1"
    assert rows["node0"].spans[0].outcome == KILLED
    assert sorted(kind for _, kind in rows["rank 0"].marks) == ["first_step", "last_step", "pg_ready"]
    assert timeline.moments == [(T0 + 30, "timeout", "timeout")]


def test_restart_and_fault(own_lab_home):
    """A rank torchrun restarted gets one span per process; the first ends at the fault; the fault is a line."""
    record = RunRecord.new("exercise10", "t1")
    record.steps = [StepRecord("kill-worker", exit_codes={0: 0, 1: 0}, started_at=T0,
                               node_exits={0: T0 + 20, 1: T0 + 20}, fault={"node": 1, "action": "kill-worker"},
                               fault_injected=True, fault_at=T0 + 6)]
    results = record.path / "results" / "kill-worker"
    events(results, 1, 0, 200, ("started", 1), ("pg_ready", 2), ("step", 3), ("step", 5))
    events(results, 1, 0, 300, ("started", 9), ("pg_ready", 10), ("step", 11), ("finished", 19))
    row = next(row for row in build_timeline(record).rows if row.label == "rank 1")
    assert [(span.start - T0, span.end - T0, span.outcome) for span in row.spans] == [(1, 6, FAILED), (9, 19, OK)]
    assert build_timeline(record).moments == [(T0 + 6, "fault", "fault: kill-worker node1")]


def test_draws_a_png_and_nothing_for_records_without_times(hung_record, own_lab_home):
    path = draw_timeline(load(hung_record.run_id))
    assert path == hung_record.path / "timeline.png" and path.read_bytes()[:8] == PNG_MAGIC
    old = RunRecord.new("exercise01", "t1")
    old.steps = [StepRecord("main", exit_codes={0: 0})]  # written before timelines: no launch time
    assert draw_timeline(old) is None and not (old.path / "timeline.png").exists()


def test_step_times_survive_the_record(own_lab_home):
    step = StepRecord("main", exit_codes={0: 0, 1: None}, nproc_per_node=2, master_port=29501, started_at=T0,
                      node_exits={0: T0 + 1.5, 1: T0 + 2}, stopped_at=T0 + 2, fault_at=T0 + 1,
                      hand_faults=[(T0 + 0.5, 1, "pause for 2s"), (T0 + 1.2, 1, "pause ended")])
    again = StepRecord.from_dict(json.loads(json.dumps(step.to_dict())))
    assert again == step


def test_faults_set_by_hand_during_a_run_are_lines_on_its_timeline(own_lab_home):
    record = RunRecord.new("torchrun", "t1")
    record.steps = [StepRecord("main", exit_codes={0: 0, 1: 0}, started_at=T0, node_exits={0: T0 + 9, 1: T0 + 9},
                               hand_faults=[(T0 + 2, 1, "pause for 3s"), (T0 + 5, 1, "pause ended")])]
    assert build_timeline(record).moments == [(T0 + 2, "fault", "lab fault: node1 pause for 3s"),
                                              (T0 + 5, "fault", "lab fault: node1 pause ended")]


FINISHING_JOIN = JOIN.replace("dist.destroy_process_group()", "labkit.finish()")


def test_real_run_draws_launch_to_exit_with_each_ranks_moments(tmp_path):
    ex, transport = exercise(tmp_path, "program: prog.py\ntimeout: 60\n", program=FINISHING_JOIN)
    # a port of its own: 29500 on this host's loopback may be any parallel job's
    record = run_exercise(ex, host_nodes(transport), RunOptions(master_port=free_port()), Collect())
    assert record.passed, record.checks
    assert not (record.path / "timeline.png").exists()  # a run spends no time on pictures nobody asked for
    assert draw_timeline(load(record.run_id)).read_bytes()[:8] == PNG_MAGIC
    step = record.steps[0]
    assert set(step.node_exits) == {0, 1} and all(when >= step.started_at for when in step.node_exits.values())
    rows = {row.label: row for row in build_timeline(load(record.run_id)).rows}
    assert set(rows) == {"node0", "node1", "rank 0", "rank 1"}
    for rank in ("rank 0", "rank 1"):
        assert [span.outcome for span in rows[rank].spans] == [OK]
        assert [kind for _, kind in rows[rank].marks] == ["pg_ready"]
        ready = rows[rank].marks[0][0]
        assert rows[rank].spans[0].start <= ready <= rows[rank].spans[0].end


# Rank 1 leaves once rank 0 has called init_process_group: rank 0 then waits for a peer that is gone.
GONE_PEER = """
import os, sys, time, labkit
rank = labkit.node_rank()
if rank == 1:
    events = os.path.join(labkit.results_dir(), "events-rank0.jsonl")
    while not (os.path.exists(events) and '"init"' in open(events).read()):
        time.sleep(0.1)
    time.sleep(1)
    sys.exit(3)
labkit.init(rank=rank, world_size=2)
"""


def test_real_stopped_run_shows_who_waited_and_who_was_gone(tmp_path):
    ex, transport = exercise(tmp_path, "program: prog.py\ntimeout: 300\n", program=GONE_PEER)
    options = RunOptions(master_port=free_port(), fail_grace=3)
    record = run_exercise(ex, host_nodes(transport), options, Collect())
    assert record.status == "failed" and record.steps[0].stopped_at is not None
    timeline = build_timeline(load(record.run_id))
    assert [kind for _, kind, _ in timeline.moments] == ["stop"]
    rows = {row.label: row for row in timeline.rows}
    gone = rows["node1"].spans[0]
    assert (gone.outcome, gone.label) == (FAILED, "exit 3") and gone.end < record.steps[0].stopped_at
    waited = rows["rank 0"].spans[0]
    assert (waited.outcome, waited.label, waited.end) == (KILLED, "waiting in init_process_group",
                                                          record.steps[0].stopped_at)
    assert rows["node0"].spans[0].outcome == KILLED and not rows["rank 0"].marks  # never got its process group
    assert draw_timeline(load(record.run_id)) == record.path / "timeline.png"
