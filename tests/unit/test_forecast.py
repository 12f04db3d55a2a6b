"""`lab forecast`: the recording's reduction, the step cut into actions, the cost model, its fit, the replay, and the
command, on synthetic steps and on profiles recorded on this lab (tests/unit/forecast_samples/: a 2-node rehearsal
of bench/forecast_workload.py at 200mbit and 0.5 CPU per node, and of exercise04's minGPT at 100mbit and 0.2 CPU)."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from lab.analysis.record import RunRecord, load
from lab.analysis.report import render
from lab.cli import cli
from lab.forecast.forecast import TargetCluster, forecast
from lab.forecast.model import LinkModel, fit_in_job_factor, fit_link, model_durations, replay
from lab.errors import ForecastError
from lab.forecast.rehearsal import Action, Collective, Rehearsal, RankProfile, StepTrace, load_rehearsal, step_trace
from lab.model.spec import parse_link

SAMPLES = Path(__file__).parent / "forecast_samples"
DDP = SAMPLES / "ddp-2x1-200mbit"
MINGPT = SAMPLES / "mingpt-2x1-100mbit"
MINGPT_CPU = SAMPLES / "mingpt-2x1-100mbit-cpu"  # with the CPU times of each step
MS = 1_000_000  # ns
HOOK = Path(__file__).parents[2] / "exercises" / "jobhooks" / "lab_profile.py"


def hook_module():
    spec = importlib.util.spec_from_file_location("lab_profile_under_test", HOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- what the job's processes write ---

def test_hook_keeps_collective_run_times_and_merges_the_training_threads_ops():
    hook = hook_module()
    events = [("aten::mm", 1, 0, 2 * MS, True), ("aten::add", 1, 2 * MS + 10_000, 3 * MS, True),  # one interval
              ("c10d::allreduce_", 1, 3 * MS, 3 * MS + 50_000, True),
              ("FSDP::all_gather (0)", 1, 3 * MS, 9 * MS + 50_000, False),  # a framework's span holding the wait
              ("gloo:all_reduce", 7, 3 * MS + 60_000, 9 * MS, False), ("aten::mm", 1, 9 * MS + 100_000, 10 * MS, True)]
    activity = hook._window_activity({"start_ns": 0, "end_ns": 10 * MS}, events)
    assert activity["busy"] == [[0, 3 * MS + 50_000], [9 * MS + 100_000, 10 * MS]]
    [collective] = activity["collectives"]
    assert (collective["op"], collective["started_ns"], collective["ended_ns"]) == ("all_reduce", 3 * MS + 60_000, 9 * MS)


def test_hook_marks_steps_only_when_profiling_and_then_only_marks(tmp_path):
    hook = hook_module()
    hook.mark_step()
    assert hook._state["bounds"] == []  # not a profiled run: nothing kept
    hook._state["folder"] = str(tmp_path)
    hook._optimizer_stepped(None, (), {})
    hook.mark_step()
    hook._optimizer_stepped(None, (), {})  # once the user marks, the optimizer's steps no longer count
    assert hook._state["source"] == "mark" and len(hook._state["bounds"]) == 1


# --- a step cut into what the training thread did ---

def synthetic_step(duration_ms: float = 40.0) -> StepTrace:
    """Compute 10 ms, issue an all_reduce (it runs 10..`10 + duration`), compute 20 ms more, wait for it, 5 ms after."""
    end = max(30.0, 10 + duration_ms)
    collectives = [{"op": "all_reduce", "bytes": 4_000_000, "group_size": 2, "issued_ns": 10 * MS,
                    "started_ns": 10 * MS, "ended_ns": int((10 + duration_ms) * MS)}]
    busy = [[0, 30 * MS]] + ([[int(end * MS) + 100_000, int(end * MS) + 5 * MS]])
    return step_trace(0, int(end * MS) + 5 * MS, collectives, busy)


def test_a_gap_that_ends_as_a_collective_ends_is_a_wait():
    step = synthetic_step(40)
    assert [action.kind for action in step.actions] == ["compute", "issue", "compute", "wait", "compute"]
    assert step.waited == pytest.approx(0.0201, abs=1e-4)  # 30 ms .. 50.1 ms
    assert step.compute == pytest.approx(0.0349, abs=1e-4)  # 30 ms, then 50.1 .. 55 ms


def test_a_thread_woken_before_the_backend_records_the_end_still_waited():
    """gloo's thread records a collective's end after it woke the waiter: the waiter's next op may begin first."""
    collectives = [{"op": "all_reduce", "bytes": 8, "issued_ns": 1 * MS, "started_ns": 1 * MS, "ended_ns": 200 * MS}]
    step = step_trace(0, 210 * MS, collectives, [[0, 5 * MS], [int(199.6 * MS), 210 * MS]])
    assert [action.kind for action in step.actions] == ["compute", "issue", "compute", "wait", "compute"]
    assert step.waited == pytest.approx(0.1946, abs=1e-4)  # 5 ms .. 199.6 ms, not computation
    late = step_trace(0, 210 * MS, collectives, [[0, 5 * MS], [180 * MS, 210 * MS]])  # 20 ms early: it computed
    assert late.waited == 0


def test_a_gap_no_collective_explains_is_computation():
    step = step_trace(0, 30 * MS, [{"op": "all_reduce", "bytes": 8, "issued_ns": 1 * MS, "started_ns": 1 * MS,
                                    "ended_ns": 2 * MS}], [[0, 10 * MS], [20 * MS, 30 * MS]])
    assert step.waited == 0 and step.compute == pytest.approx(0.030)


# --- replay ---

def test_replay_hides_a_collective_shorter_than_the_computation_after_it():
    step = synthetic_step(40)
    hidden = replay(step, [0.015])  # ends at 25 ms, before the thread waits at 30 ms
    assert hidden.exposed == pytest.approx(0.0, abs=1e-6) and hidden.seconds == pytest.approx(step.compute)
    longer = replay(step, [0.060])  # ends at 70 ms: 40 ms exposed
    assert longer.exposed == pytest.approx(0.040, abs=1e-4)
    assert replay(step, [0.060], compute_scale=2).compute == pytest.approx(2 * step.compute)


def test_collectives_queue_one_after_the_other_on_the_link():
    collectives = (Collective("all_reduce", 1, 2, 0.0, 0.0, 0.01), Collective("all_reduce", 1, 2, 0.001, 0.01, 0.02))
    step = StepTrace(0.03, collectives, (Action("issue", index=0), Action("compute", 0.001), Action("issue", index=1),
                                         Action("wait", index=1)))
    assert replay(step, [0.010, 0.010]).seconds == pytest.approx(0.020)  # not 0.011: the second waits for the first


# --- the cost model ---

def test_ring_all_reduce_cost_grows_as_2_p_minus_1_over_p():
    link = LinkModel(latency_s=0.0, wire_s_per_byte=1e-8, reduce_s_per_byte=0.0)
    two, four, many = (link.collective_seconds("all_reduce", 10**7, p) for p in (2, 4, 1000))
    assert four / two == pytest.approx(1.5) and many / two == pytest.approx(2 * 999 / 1000)
    assert link.collective_seconds("all_reduce", 10**7, 1) == 0
    latency = LinkModel(latency_s=1e-4, wire_s_per_byte=0.0, reduce_s_per_byte=0.0)
    assert latency.collective_seconds("all_reduce", 8, 8) == pytest.approx(14e-4)  # 2(p-1) steps
    assert latency.collective_seconds("reduce_scatter_tensor", 8, 8) == pytest.approx(7e-4)  # one half


def test_fit_recovers_latency_and_slope_from_a_calibration_sweep():
    alpha, wire, gamma = 150e-6, 8 / 100e6, 2e-9  # 100 Mbit/s
    rows = [[size, 2 * alpha + size * wire + size * gamma / 2] for size in (1024 * 4**k for k in range(8))]
    link = fit_link({"world_size": 2, "all_reduce": rows, "reduce_seconds_per_byte": gamma}, parse_link("100mbit"))
    assert link.latency_s == pytest.approx(alpha, rel=0.01)
    assert link.wire_s_per_byte == pytest.approx(wire, rel=0.01)
    assert link.reduce_s_per_byte == pytest.approx(gamma, rel=0.05)


def test_another_link_scales_the_wire_by_the_rates_and_adds_its_delay():
    link = LinkModel(1e-4, 8e-8, 1e-9, rate_bps=100e6)
    faster = link.on_link(parse_link("1gbit:500us"))
    assert faster.wire_s_per_byte == pytest.approx(8e-9) and faster.latency_s == pytest.approx(6e-4)
    unshaped = LinkModel(1e-4, 1e-9, 1e-9, rate_bps=None)
    assert unshaped.on_link(parse_link("100mbit")).wire_s_per_byte == pytest.approx(8e-8)
    assert unshaped.on_link(parse_link("100gbit")).wire_s_per_byte == pytest.approx(1e-9)  # no faster than it was


def test_the_in_job_factor_is_what_the_rehearsal_s_collectives_took_over_the_model():
    link = LinkModel(1e-4, 1e-8, 0.0)
    modelled = link.collective_seconds("all_reduce", 4_000_000, 2)  # 40.2 ms
    step = synthetic_step(2 * modelled * 1000)  # the job's all_reduce took twice the model
    assert fit_in_job_factor((step,), link, 2) == pytest.approx(2.0, rel=0.02)
    hidden = synthetic_step(5)  # ended long before the wait: nothing says how slow it was
    assert fit_in_job_factor((hidden,), link, 2) == 1.0
    durations = model_durations(step, link, 8, 2, factor=2.0)
    assert durations[0] == pytest.approx(2 * link.collective_seconds("all_reduce", 4_000_000, 8))


def test_the_hook_keeps_the_cpu_time_of_the_thread_the_process_and_the_node_at_each_step(tmp_path):
    hook = hook_module()
    hook._state["folder"] = str(tmp_path)
    for _ in range(3):
        hook._optimizer_stepped(None, (), {})
        sum(range(200_000))  # CPU between the steps
    marks = hook._state["cpu"]
    assert len(marks) == len(hook._state["bounds"]) == 3
    assert all(isinstance(thread, int) and process >= thread and (node is None or isinstance(node, int))
               for thread, process, node in marks)
    assert marks[2][0] > marks[1][0] > marks[0][0]  # the training thread's CPU went on


def test_a_job_that_ends_with_os_exit_still_writes_its_steps_and_its_forked_children_write_none(tmp_path):
    """The lab's exercises end with os._exit (labkit.finish), which runs no atexit; a child forked mid-training (a
    DataLoader worker) inherits the steps, and ends with os._exit too."""
    job = ("import os, lab_profile\n"
           "for _ in range(12): lab_profile.mark_step()\n"
           "child = os.fork()\n"
           "if child == 0: os._exit(0)\n"
           "os.waitpid(child, 0)\n"
           "os._exit(0)\n")
    env = {**os.environ, "PYTHONPATH": str(HOOK.parent), "LAB_PROFILE_DIR": str(tmp_path / "profile"),
           "LAB_PROFILE_SKIP": "100"}  # no profiler window: torch is not needed
    subprocess.run([sys.executable, "-c", job], env=env, check=True, timeout=60)
    [written] = (tmp_path / "profile").glob("profile-*.json")
    data = json.loads(written.read_text())
    assert len(data["steps"]) == 11 and len(data["cpu"]) == 12 and data["window"] is None


def quota_rehearsal(step_ms: float, cpus: float | None, cpu_ms: tuple[float, float] | None) -> Rehearsal:
    """Two nodes of one rank each, every profiled step synthetic_step(40) (35 ms of computation by the wall clock),
    every steady step `step_ms`, and per step `cpu_ms` = (the training thread's, the node's) CPU milliseconds."""
    steps = (step_ms / 1000,) * 16
    cpu = (((cpu_ms[0] / 1000, cpu_ms[1] / 1000, cpu_ms[1] / 1000),) * 16) if cpu_ms else ()
    ranks = tuple(RankProfile(rank, rank, steps, (synthetic_step(40),) * 6, 4, "optimizer", cpu) for rank in (0, 1))
    calibration = {"world_size": 2, "all_reduce": [[size, 2e-4 + size * 1e-8] for size in (1024, 2**20, 2**23)]}
    return Rehearsal(2, 1, "100mbit", cpus, calibration, ranks)


def test_a_node_under_a_cpu_limit_steps_no_faster_than_its_cpu_time_allows():
    # 20 ms of CPU a step on 0.2 of a CPU: 100 ms a step, though the training thread computes 14 ms at full speed
    throttled = forecast(quota_rehearsal(100, 0.2, (14, 20)), TargetCluster((4, 8)))
    assert throttled.rehearsal_row.step_ms == pytest.approx(100, rel=0.01)
    # 6 ms of the node's CPU is not the training thread's: it grows as a ring's bytes, 1.5x at 4 ranks, 1.75x at 8
    assert [row.step_ms for row in throttled.rows] == pytest.approx([115, 122.5], rel=0.01)
    assert any("no step is shorter than 100 ms" in line for line in throttled.assumptions)
    # the same steps with no CPU times: the wall clock's computation, the quota's pauses included, adds to the waits
    walled = forecast(quota_rehearsal(100, 0.2, None), TargetCluster((4, 8)))
    assert walled.rows[0].step_ms > throttled.rows[0].step_ms
    assert any("holds no CPU times" in line for line in walled.assumptions)
    # without a CPU limit the CPU times change nothing; nor for a GPU's computation (a what-if)
    unlimited = forecast(quota_rehearsal(100, None, (14, 20)), TargetCluster((4, 8)))
    assert unlimited.to_json() == forecast(quota_rehearsal(100, None, None), TargetCluster((4, 8))).to_json()
    gpu = forecast(quota_rehearsal(100, 0.2, (14, 20)), TargetCluster((4,), compute_ms=5.0))
    assert gpu.rows[0].step_ms < 100


# --- recorded rehearsals ---

def test_recorded_ddp_rehearsal_reads_back_with_its_buckets_and_waits():
    rehearsal = load_rehearsal(DDP)
    assert (rehearsal.nodes, rehearsal.nproc_per_node, rehearsal.link, rehearsal.world_size) == (2, 1, "200mbit", 2)
    for rank in rehearsal.ranks:
        assert rank.step_source == "optimizer" and len(rank.window) == 4
        for step in rank.window:
            assert [c.nbytes for c in step.collectives] == [1050624] * 8  # 8 buckets of 2 x (512 x 512 + 512) floats
            assert sum(action.kind == "wait" for action in step.actions) >= 1
    assert rehearsal.comm_share > 0.8  # 8.4 MB a step over 200 Mbit/s against ~20 ms of computation


def test_forecast_of_the_recorded_rehearsal_reproduces_it_and_slows_with_size():
    rehearsal = load_rehearsal(DDP)
    result = forecast(rehearsal, TargetCluster((4, 8, 16)))
    assert result.rehearsal_row.step_ms == pytest.approx(rehearsal.step_seconds * 1000, rel=0.1)
    steps = [result.rehearsal_row.step_ms] + [row.step_ms for row in result.rows]
    assert steps == sorted(steps) and all(0 < row.efficiency < 1 for row in result.rows)
    # bandwidth-bound: from 2 to 4 ranks the ring moves 1.5x the bytes per rank
    assert result.rows[0].comm_ms / result.rehearsal_row.comm_ms == pytest.approx(1.5, rel=0.05)
    assert set(result.levers) == {4, 8, 16}  # communication dominates: the levers are named
    levers = {lever.name: lever for lever in result.levers[8]}
    assert levers["fp16 compression"].sample_speedup > 1.5 and levers["gradient accumulation"].sample_speedup > 2
    data = result.to_json()
    assert {"nodes", "nproc_per_node", "step_ms", "comm_exposed_ms", "efficiency"} <= set(data[0])


def test_a_faster_link_and_a_given_computation_change_the_forecast_as_said():
    rehearsal = load_rehearsal(DDP)
    slow = forecast(rehearsal, TargetCluster((8,)))
    fast = forecast(rehearsal, TargetCluster((8,), link="10gbit"))
    # 50x the rate, but the reduction on a CPU limited to 0.5 of a core stays: far less than 50x faster
    assert slow.rows[0].comm_exposed_ms / 50 < fast.rows[0].comm_exposed_ms < slow.rows[0].comm_exposed_ms / 2
    doubled = forecast(rehearsal, TargetCluster((4,), nproc_per_node=2))
    assert (doubled.rehearsal_row.ranks, doubled.rows[0].ranks) == (4, 8)  # efficiency against 2 nodes x 2
    assert doubled.rows[0].compute_ms == pytest.approx(2 * slow.rows[0].compute_ms, rel=1e-3)  # 2 share 0.5 CPU
    gpu = forecast(rehearsal, TargetCluster((8,), compute_ms=5.0))
    assert gpu.what_if and gpu.rows[0].compute_ms == pytest.approx(5.0, rel=0.01)
    assert any("WHAT-IF" in line for line in gpu.assumptions)
    with pytest.raises(ForecastError):
        forecast(rehearsal, TargetCluster((8,), compute_ms=5.0, compute_scale=0.5))


def test_recorded_mingpt_rehearsal_has_one_small_bucket_a_step():
    rehearsal = load_rehearsal(MINGPT)
    assert all(len(step.collectives) == 1 for rank in rehearsal.ranks for step in rank.window)
    result = forecast(rehearsal, TargetCluster((4, 8)))
    assert result.rows[1].step_ms >= result.rows[0].step_ms


def test_recorded_throttled_rehearsal_is_bound_by_its_nodes_cpu_time():
    """0.2 CPU a node: the training thread computes ~12 ms a step at full speed and the node spends ~13 ms of CPU,
    so a step takes at least ~65 ms; the steps measured 66 ms."""
    rehearsal = load_rehearsal(MINGPT_CPU)
    threads, whole = rehearsal.node_cpu_seconds()
    assert 0.005 < threads <= whole < 0.03 and len(rehearsal.ranks[0].step_seconds) == 40
    assert whole / 0.2 == pytest.approx(rehearsal.step_seconds, rel=0.1)
    result = forecast(rehearsal, TargetCluster((4, 8)))
    assert any(line.startswith("CPU limit 0.2 per node: a node spent") for line in result.assumptions)
    assert result.rehearsal_row.step_ms == pytest.approx(rehearsal.step_seconds * 1000, rel=0.05)
    assert all(row.step_ms >= whole / 0.2 * 1000 for row in result.rows)


# --- what a run lacks ---

def test_what_a_run_lacks_is_said_in_one_error(tmp_path):
    with pytest.raises(ForecastError, match="was not profiled"):
        load_rehearsal(tmp_path / "profile")
    folder = tmp_path / "short"
    shutil.copytree(DDP, folder)
    for path in folder.glob("profile-*.json"):
        data = json.loads(path.read_text())
        data["window"] = None
        path.write_text(json.dumps(data))
    with pytest.raises(ForecastError, match="no profiled steps"):
        load_rehearsal(folder)
    broken = tmp_path / "uncalibrated"
    shutil.copytree(DDP, broken)
    facts = json.loads((broken / "lab.json").read_text())
    facts["calibration"] = {"error": "the link calibration gave no result: node1 exited 1"}
    (broken / "lab.json").write_text(json.dumps(facts))
    with pytest.raises(ForecastError, match="no calibration of its link"):
        load_rehearsal(broken)


# --- the command ---

@pytest.fixture
def profiled_record(own_lab_home):
    record = RunRecord.new("torchrun", "forecast-test")
    record.status = "passed"
    record.save()
    shutil.copytree(DDP, record.path / "profile")
    return record


def test_command_prints_a_table_the_assumptions_and_draws_the_curve(profiled_record):
    result = CliRunner().invoke(cli, ["forecast", profiled_record.run_id, "--nodes", "4,8", "--steps", "1000",
                                      "--price", "2.5"])
    assert result.exit_code == 0, result.output
    assert "assumptions:" in result.output and "levers" in result.output and "cost" in result.output
    assert (profiled_record.path / "forecast.png").stat().st_size > 10_000
    assert "<h2>Forecast</h2>" in render(load(profiled_record.run_id))  # `lab report` shows the curve


def test_command_json_has_one_object_per_size(profiled_record):
    result = CliRunner().invoke(cli, ["forecast", profiled_record.run_id, "--nodes", "4,8,16,32", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["nodes"] for row in rows] == [4, 8, 16, 32] and all(row["nproc_per_node"] == 1 for row in rows)


def lab(*args):
    return subprocess.run([sys.executable, "-m", "lab.cli", *args], capture_output=True, text=True, timeout=120)


def test_command_refuses_bad_input_in_one_line(profiled_record):
    for args, needle in ((["--nodes", "four"], "--nodes 'four'"), (["--link", "fast"], "--link 'fast'")):
        result = lab("forecast", profiled_record.run_id, *args)
        assert result.returncode == 2 and needle in result.stderr and "Traceback" not in result.stderr


def test_command_on_a_run_that_was_not_profiled_says_what_it_lacks(own_lab_home):
    record = RunRecord.new("torchrun", "forecast-test")
    record.status = "passed"
    record.save()
    result = lab("forecast", record.run_id)
    assert result.returncode == 2 and "was not profiled" in result.stderr and "--profile" in result.stderr


def test_fsdp2_all_gathers_and_their_waits_inside_fsdp_spans_are_read():
    rehearsal = load_rehearsal(SAMPLES / "fsdp2-1x2-native")
    step = rehearsal.ranks[0].window[0]
    assert {c.op for c in step.collectives} >= {"all_gather"}
    gathers = [index for index, c in enumerate(step.collectives) if c.op == "all_gather"]
    waited = {action.index for action in step.actions if action.kind == "wait"}
    assert set(gathers[:4]) <= waited  # forward waits for each layer's parameters
    for action in step.actions:  # never a wait for what was not yet issued
        if action.kind == "wait":
            issued = [a for a in step.actions if a.kind == "issue" and a.index == action.index]
            assert issued and step.actions.index(issued[0]) < step.actions.index(action)
    result = forecast(rehearsal, TargetCluster((2, 4), nproc_per_node=2))
    assert result.rows[1].comm_ms > result.rows[0].comm_ms


def test_profiled_launch_asks_the_hook_and_keeps_its_profiles_even_when_the_run_passed(tmp_path):
    from lab.jobs.flight import FlightRecording

    recording = FlightRecording("/lab/shared/flight/run", tmp_path / "flight")
    assert "LAB_PROFILE_DIR" not in recording.env({})
    assert recording.env({}, profile=True)["LAB_PROFILE_DIR"] == "/lab/shared/flight/run"
    (tmp_path / "flight").mkdir()
    (tmp_path / "flight" / "profile-node0-pid7.json").write_text("{}")
    (tmp_path / "flight" / "exit-node0-pid7.json").write_text("{}")
    assert recording.keep_profiles(tmp_path / "record" / "profile") == 1
    recording.keep(None)  # the run passed: its recorders go, the profile stayed in the record
    assert (tmp_path / "record" / "profile" / "profile-node0-pid7.json").is_file()
    assert not (tmp_path / "flight").exists()
