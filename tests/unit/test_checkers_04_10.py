"""The checkers of exercises 04 and 10 on hand-built outcomes (what the programs report passes, each kind of wrong
result fails the check about it), and the runner's handling of their faults."""

import copy
import math

import pytest

from lab.jobs.checks import RunOutcome, StepOutcome, load_sibling
from lab.errors import SpecError
from lab.jobs.exercises import LaunchContext, find, load_exercise, step_command
from lab.jobs.runner import _checks, _maybe_inject
from tests.unit.checker_helpers import assert_fails, failed
from tests.unit.test_exercise_manifest import make_exercise

NNODES, NPROC = 2, 2
WORLD = NNODES * NPROC


def run_of(steps: dict[str, dict[int, dict]], exit_codes: dict[str, dict] | None = None) -> RunOutcome:
    exit_codes = exit_codes or {}
    return RunOutcome(nnodes=NNODES, nproc_per_node=NPROC, steps={
        name: StepOutcome(name, results=results, exit_codes=exit_codes.get(name, {n: 0 for n in range(NNODES)}))
        for name, results in steps.items()})


# --- exercise 04: minGPT with DDP, snapshot and resume ---------------------------------------------------------

def gpt_results() -> dict[str, dict[int, dict]]:
    """What train.py writes for `train` (--epochs 3) and `resume` (--epochs 6) on 2 nodes x 2 processes."""
    corpus = load_sibling(str(find("04").path / "check.py"), "corpus")
    windows = (len(corpus.text()) - 1) // 32
    sample = ("the node saves the snapshot.\nrank zero loads its weights again.\n"
              "each rank sends a message at once.\nthe st")

    def step(start: int, total: int, params: str, loaded, first: float, final: float) -> dict[int, dict]:
        return {rank: {"rank": rank, "node_rank": rank // NPROC, "dataset_size": windows, "block_size": 32,
                       "samples": math.ceil(windows / WORLD), "start_epoch": start, "epochs_total": total,
                       "epochs_trained": list(range(start, total)), "loaded_params_hash": loaded,
                       "first_loss": first, "final_loss": final, "params_hash": params, "prompt": "the ",
                       "sample_chars": len(sample) - 4, "sample": sample if rank == 0 else ""}
                for rank in range(WORLD)}

    return {"train": step(0, 3, "h-train", None, 3.2, 1.1), "resume": step(3, 6, "h-resume", "h-train", 0.8, 0.4)}


def test_gpt_correct_outcome_passes():
    assert failed(find("04").load_checker(), run_of(gpt_results())) == []


@pytest.mark.parametrize("step, mutate, fragment", [
    ("resume", lambda r: r.pop(3), "resume: all 4 ranks reported"),
    ("train", lambda r: r[2].update(samples=1), "train: DistributedSampler gave every rank"),
    ("train", lambda r: r[1].update(dataset_size=10), "train: dataset is"),
    ("resume", lambda r: r[1].update(params_hash="other"), "resume: parameters identical"),
    ("train", lambda r: [v.update(start_epoch=1, epochs_trained=[1, 2]) for v in r.values()], "train: started fresh"),
    ("resume", lambda r: [v.update(start_epoch=0) for v in r.values()], "resume: loaded the snapshot at epoch 3"),
    ("resume", lambda r: [v.update(epochs_trained=[0, 1, 2, 3, 4, 5]) for v in r.values()],
     "resume: trained only the remaining epochs"),
    ("resume", lambda r: r[0].update(loaded_params_hash=None), "resume: the loaded snapshot holds"),
    ("resume", lambda r: r[0].update(final_loss=2.9), "final loss"),
    ("resume", lambda r: r[0].update(sample=""), "sampled"),
    ("resume", lambda r: r[0].update(sample="the " + "qxz vbnm " * 12 + "wer"), "sampled"),
])
def test_gpt_wrong_outcomes_fail(step, mutate, fragment):
    results = gpt_results()
    mutate(results[step])
    assert_fails(find("04").load_checker(), run_of(results), fragment)


# --- exercise 10: a killed worker, then a lost node --------------------------------------------------------------

def fault_results() -> dict[str, dict[int, dict]]:
    """What elastic_train.py writes: kill-worker ends with 4 ranks after a restart, kill-node with node0's 2."""
    def step(world: int, history: list[dict]) -> dict[int, dict]:
        return {rank: {"rank": rank, "node_rank": rank // NPROC, "pg_world_size": world, "restart_count": 1,
                       "start_epoch": 2, "epochs_total": 10, "epochs_trained": list(range(2, 10)),
                       "dataset_size": 512, "samples": math.ceil(512 / world), "params_hash": f"h{world}",
                       "history": history} for rank in range(world)}

    first = {"world_size": WORLD, "nodes": NNODES, "start_epoch": 0, "restart_count": 0}
    return {"kill-worker": step(WORLD, [first, {**first, "start_epoch": 2, "restart_count": 1}]),
            "kill-node": step(NPROC, [first, {"world_size": NPROC, "nodes": 1, "start_epoch": 2, "restart_count": 1}])}


KILLED = {"kill-worker": {0: 0, 1: 0}, "kill-node": {0: 0, 1: 137}}


def test_fault_correct_outcome_passes():
    assert failed(find("10").load_checker(), run_of(fault_results(), KILLED)) == []


@pytest.mark.parametrize("step, mutate, fragment", [
    ("kill-worker", lambda r: r.pop(2), "kill-worker: all 4 ranks reported"),
    ("kill-worker", lambda r: [v.update(restart_count=0) for v in r.values()], "TORCHELASTIC_RESTART_COUNT > 0"),
    ("kill-worker", lambda r: [v.update(start_epoch=0, epochs_trained=list(range(10))) for v in r.values()],
     "kill-worker: resumed from a snapshot"),
    ("kill-worker", lambda r: r[1].update(epochs_trained=[2, 3]), "kill-worker: trained the remaining epochs"),
    ("kill-worker", lambda r: r[3].update(params_hash="x"), "kill-worker: parameters identical"),
    ("kill-node", lambda r: r.update(copy.deepcopy(fault_results()["kill-worker"])), "kill-node: all 2 ranks reported"),
    ("kill-node", lambda r: [v.update(pg_world_size=4) for v in r.values()], "kill-node: the final world had 2 ranks"),
    ("kill-node", lambda r: r[0].update(history=[{"world_size": 2}]), "kill-node: training began on 2 nodes"),
    ("kill-node", lambda r: r[1].update(samples=128), "kill-node: DistributedSampler"),
])
def test_fault_wrong_outcomes_fail(step, mutate, fragment):
    results = fault_results()
    mutate(results[step])
    assert_fails(find("10").load_checker(), run_of(results, KILLED), fragment)


def test_fault_node_that_finished_was_not_lost():
    assert_fails(find("10").load_checker(), run_of(fault_results(), {"kill-worker": {0: 0, 1: 0}, "kill-node": {0: 0, 1: 0}}),
                 "kill-node: node1 was killed by the lab")


# --- the runner's side: the lost node's exit status, the kill modes, the elastic rendezvous -----------------------

def test_lab_exit_check_skips_only_the_node_a_kill_node_fault_took():
    names = {check.name: check.passed for check in _checks(find("10"), run_of(fault_results(), KILLED))}
    assert names["kill-node: every surviving node exited 0 (node1 killed on purpose)"] is True
    assert names["kill-worker: every node exited 0"] is True
    broken = run_of(fault_results(), {"kill-worker": {0: 0, 1: -9}, "kill-node": {0: 1, 1: 137}})
    names = {check.name: check.passed for check in _checks(find("10"), broken)}
    assert names["kill-node: every surviving node exited 0 (node1 killed on purpose)"] is False
    assert names["kill-worker: every node exited 0"] is False


class FakeTransport:
    def __init__(self, shared):
        self.host_shared_dir = shared
        self.kills = []

    def kill(self, index, run_id, mode="all"):
        self.kills.append((index, run_id, mode))
        return 1


class Quiet:
    def event(self, text):
        pass


@pytest.mark.parametrize("action, mode", [("kill-worker", "worker"), ("kill-node", "all")])
def test_fault_waits_for_its_file_then_kills_what_the_action_says(tmp_path, action, mode):
    transport = FakeTransport(tmp_path)
    fault = {"node": "1", "action": action, "when_file": "a.first-snapshot"}
    assert not _maybe_inject(fault, transport, "run1-step", "run1", Quiet()) and transport.kills == []
    (tmp_path / "runs" / "run1" / "work").mkdir(parents=True)
    (tmp_path / "runs" / "run1" / "work" / "a.first-snapshot").touch()
    assert _maybe_inject(fault, transport, "run1-step", "run1", Quiet())
    assert transport.kills == [(1, "run1-step", mode)]


def test_unknown_fault_action_is_refused(tmp_path):
    manifest = "program: prog.py\nsteps:\n  - name: s\n    fault: {node: 1, action: unplug, when_file: f}\n"
    with pytest.raises(SpecError) as error:
        load_exercise(make_exercise(tmp_path, "exercise10_bad", manifest))
    assert "kill-node" in error.value.hint


def test_elastic_step_gets_short_rendezvous_timeouts_and_a_fixed_store_host():
    exercise = find("10")
    steps = {step.name: step for step in exercise.steps}
    ctx = LaunchContext(node_rank=1, nnodes=2, nproc_per_node=2, master_addr="node0", master_port=29500, python="/py",
                        exercises_dir="/ex", results_dir="/r", work_dir="/w", run_id="run1-kill-node")
    elastic, env = step_command(exercise, steps["kill-node"], ctx)
    conf = next(arg for arg in elastic if arg.startswith("--rdzv-conf="))
    assert "--nnodes=1:2" in elastic and "last_call_timeout=5" in conf and "is_host=false" in conf
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    fixed, _ = step_command(exercise, steps["kill-worker"], ctx)
    assert "--nnodes=2" in fixed and "--max-restarts=3" in fixed
    assert not any("last_call_timeout" in arg for arg in fixed)
