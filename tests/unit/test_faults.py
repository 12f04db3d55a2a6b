"""lab fault inputs: netem arguments and node names."""

import docker.errors
import pytest

from lab.errors import EngineError, SpecError
from lab.nodes.faults import netem_args, parse_node


def test_netem_args():
    assert netem_args(50, 10, None) == ["delay", "50ms", "10ms"]
    assert netem_args(None, None, "100mbit") == ["rate", "100mbit"]
    assert netem_args(5, None, "1gbit") == ["delay", "5ms", "rate", "1gbit"]
    with pytest.raises(SpecError):
        netem_args(None, None, None)
    with pytest.raises(SpecError):
        netem_args(None, 5, None)


def test_parse_node():
    assert parse_node("node1", 2) == 1 and parse_node("0", 2) == 0
    for bad in ("node2", "x", "-1", "node"):
        with pytest.raises(SpecError):
            parse_node(bad, 2)


# --- timed faults, clear, and kernels without netem ----------------------------------------------------------
import os
import signal
import time
from types import SimpleNamespace

from lab.errors import LabStateError
from lab.model.spec import LabSpec
from lab.nodes import fault_timer
from lab.nodes.driver import NodeState
from lab.nodes.faults import faults_between, inject, parse_duration, revert


class FakeDriver:
    """A 2-node lab whose nodes' engine state is a dict; records what was done to them."""

    def __init__(self, net_admin=False):
        self.spec = LabSpec(name="f", nodes=2, net_admin=net_admin)
        self.status = {0: "running", 1: "running"}
        self.on_network = {0: True, 1: True}
        self.done = []
        self.tc_answer = (0, "")

    def existing_spec(self, name):
        return self.spec

    def containers(self, name):
        return [SimpleNamespace(id=f"id{index}", status=status) for index, status in self.status.items()]

    def container(self, name, index):
        return self.containers(name)[index]

    def node_status(self, name, index):
        return self.status[index]

    def node_states(self, name):
        faults = {"paused": ["paused"], "exited": ["killed"]}
        return [NodeState(index, f"node{index}", f"c{index}", status, None, None, None, None,
                          faults=faults.get(status, []) + ([] if self.on_network[index] else ["partitioned"]))
                for index, status in self.status.items()]

    def _act(self, verb, index, status=None):
        self.done.append(f"{verb} {index}")
        if status:
            self.status[index] = status

    def kill_node(self, name, index):
        self._act("kill", index, "exited")

    def start_node(self, name, index):
        self._act("start", index, "running")

    def pause_node(self, name, index):
        self._act("pause", index, "paused")

    def unpause_node(self, name, index):
        self._act("unpause", index, "running")

    def disconnect_node(self, name, index):
        self._act("disconnect", index)
        self.on_network[index] = False

    def reconnect_node(self, name, index):
        self._act("reconnect", index)
        self.on_network[index] = True

    def exec_output(self, name, index, argv, user=""):
        self.done.append(" ".join(argv))
        return self.tc_answer


def test_parse_duration():
    assert parse_duration("30s") == 30 and parse_duration("2m") == 120 and parse_duration("1h") == 3600
    assert parse_duration("500ms") == 0.5 and parse_duration("7") == 7 and parse_duration("1.5s") == 1.5
    for bad in ("0s", "", "5x", "-3s", "s", "1e3"):
        with pytest.raises(SpecError):
            parse_duration(bad)


def test_for_and_node_are_checked_before_the_engine_is_asked():
    for action, node, duration in (("unpause", "node1", "5s"), ("heal", "node1", "5s"), ("clear", None, "5s"),
                                   ("partition", "node1", "soon"), ("partition", None, None)):
        with pytest.raises(SpecError):
            inject("f", action, node, duration=duration, driver=None)


def test_a_kernel_without_netem_is_one_clear_error():
    driver = FakeDriver(net_admin=True)
    driver.tc_answer = (2, "Error: Specified qdisc kind is unknown.\n")
    with pytest.raises(LabStateError, match="kernel has no netem"):
        inject("f", "delay", "node1", ms=50, driver=driver)


def test_clear_heals_every_fault_and_says_so_once(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    driver = FakeDriver()
    inject("f", "kill", "node0", driver=driver)
    inject("f", "partition", "node1", driver=driver)
    first = inject("f", "clear", None, driver=driver)
    assert first.splitlines() == ["node0: healed killed", "node1: healed partitioned"]
    assert driver.status == {0: "running", 1: "running"} and all(driver.on_network.values())
    assert inject("f", "clear", None, driver=driver) == "nothing to clear: no fault and no timer left on lab 'f'"
    assert inject("f", "clear", "node1", driver=driver).startswith("nothing to clear")


def test_faults_set_and_healed_by_hand_are_logged_with_their_time(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    driver = FakeDriver()
    before = time.time()
    inject("f", "kill", "node0", driver=driver)
    inject("f", "heal", "node0", driver=driver)
    inject("f", "clear", None, driver=driver)  # nothing left to heal: nothing logged
    after = time.time()
    events = faults_between("f", before, after)
    assert [(node, action) for _, node, action in events] == [(0, "kill"), (0, "heal (killed)")]
    assert all(before <= when <= after for when, _, _ in events)
    assert faults_between("f", after + 1, after + 2) == [] and faults_between("other", before, after) == []
    with (tmp_path / "labs" / "f" / "fault-log.jsonl").open("a") as log:
        log.write('{"at": 1')  # a line a crash cut short
    assert len(faults_between("f", before, after)) == 2


def test_revert_undoes_only_its_own_fault_on_its_own_container(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    driver = FakeDriver()
    driver.status[0], driver.on_network[1] = "exited", False
    timer = fault_timer.Timer("f", 0, "kill", time.time(), "id0", os.getpid())
    revert(timer, driver)
    assert driver.status[0] == "running" and driver.done == ["start 0"]
    revert(fault_timer.Timer("f", 1, "partition", time.time(), "id1", os.getpid()), driver)
    assert driver.on_network[1]
    driver.status[1], driver.done = "paused", []
    revert(fault_timer.Timer("f", 1, "pause", time.time(), "another-container", os.getpid()), driver)
    assert driver.done == [] and driver.status[1] == "paused"  # the lab was recreated since: not this timer's node


def wait_for(predicate, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def ended(pid):
    """The timer (a child of this test process: `arm` started it) has exited; reaps it."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:  # reaped already
        return True


def test_a_timer_is_its_own_process_listed_until_cancelled(monkeypatch, tmp_path):
    """A real timer process (it never reaches its revert here): armed, listed with its time left, then ended."""
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    timer = fault_timer.arm("f", 1, "partition", 600, "id1")
    assert timer.pid != os.getpid() and os.getsid(timer.pid) == timer.pid  # a session of its own: outlives `lab`
    assert fault_timer.pending("f") == [timer] and 590 < timer.seconds_left() <= 600
    again = fault_timer.arm("f", 1, "partition", 600, "id1")  # the same fault again replaces the timer
    assert fault_timer.pending("f") == [again] and wait_for(lambda: ended(timer.pid))
    fault_timer.cancel(again)
    assert fault_timer.pending("f") == [] and wait_for(lambda: ended(again.pid))


def test_a_timer_whose_file_is_gone_ends_without_reverting(monkeypatch, tmp_path):
    """`lab down` removes the lab folder: the timer notices and exits, its revert never runs (no log line of it)."""
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    timer = fault_timer.arm("f", 0, "pause", 600, "id0")
    fault_timer.state_file("f", 0, "pause").unlink()
    assert wait_for(lambda: ended(timer.pid))
    assert "revert" not in (tmp_path / "logs" / "fault-timers.log").read_text()


def test_a_dead_timer_is_not_listed(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_HOME", str(tmp_path))
    timer = fault_timer.arm("f", 0, "stop", 600, "id0")
    os.kill(timer.pid, signal.SIGKILL)
    assert wait_for(lambda: ended(timer.pid))
    assert fault_timer.pending("f") == [] and not fault_timer.state_file("f", 0, "stop").exists()


class FreezingContainer:
    """A container whose pause fails as runc's freezer does for the first `failures` tries, with `words`."""

    def __init__(self, failures: int, words: str):
        self.failures, self.words, self.tries = failures, words, 0

    def pause(self):
        self.tries += 1
        if self.tries <= self.failures:
            raise docker.errors.APIError("500 Server Error", explanation=self.words)


def test_a_pause_the_freezer_could_not_do_at_once_is_tried_again_and_other_refusals_are_not(monkeypatch):
    from lab.nodes import driver as driver_module
    monkeypatch.setattr(driver_module.time, "sleep", lambda seconds: None)
    driver = object.__new__(driver_module.DockerDriver)
    busy = FreezingContainer(2, "Cannot pause container 616c: OCI runtime pause failed: unable to freeze: unknown")
    monkeypatch.setattr(driver, "container", lambda name, index: busy, raising=False)
    driver.pause_node("demo", 1)
    assert busy.tries == 3
    gone = FreezingContainer(9, "Container 616c is not running")
    monkeypatch.setattr(driver, "container", lambda name, index: gone, raising=False)
    with pytest.raises(EngineError, match="Docker refused to pause node1: Container 616c is not running"):
        driver.pause_node("demo", 1)
    assert gone.tries == 1
    stuck = FreezingContainer(99, "OCI runtime pause failed: unable to freeze: unknown")
    monkeypatch.setattr(driver, "container", lambda name, index: stuck, raising=False)
    with pytest.raises(EngineError, match="unable to freeze"):
        driver.pause_node("demo", 1)
    assert stuck.tries == driver_module.PAUSE_TRIES
