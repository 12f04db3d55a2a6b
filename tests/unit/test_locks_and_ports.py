"""Locks held by a running command (lab/locks.py): the lab's change lock and the runs' port reservations; no engine."""

import itertools
import signal
import subprocess
import sys
import threading

import pytest

from lab import paths
from lab.errors import LabStateError, RunError, SpecError
from lab.jobs.transports import DEFAULT_MASTER_PORT, LocalTransport, PortReservations, choose_port
from lab.locks import holder, try_lock
from lab.nodes import lifecycle

# Holds the lock on argv[1] until killed; says so once it has it.
HOLD = "import sys, time\nfrom lab.locks import try_lock\nlock = try_lock(__import__('pathlib').Path(sys.argv[1]))\n" \
       "print('held' if lock else 'refused', flush=True)\ntime.sleep(600)\n"


@pytest.fixture
def other_process():
    """Start a process that takes a lock and keeps it until the test kills it."""
    started = []

    def hold(path):
        process = subprocess.Popen([sys.executable, "-c", HOLD, str(path), "up", "--name", "demo"],
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline().strip() == "held"
        return process

    yield hold
    for process in started:
        process.kill()
        process.wait()


def test_a_lock_is_refused_while_another_process_holds_it_and_free_once_it_dies(tmp_path, other_process):
    path = tmp_path / "locks" / "demo.lock"
    process = other_process(path)
    assert try_lock(path) is None
    assert holder(path) == f"pid {process.pid} (`-c {path} up --name demo`)"
    process.send_signal(signal.SIGKILL)  # no clean-up runs: the kernel drops the lock with the process
    process.wait()
    lock = try_lock(path)
    assert lock is not None
    lock.release()


def test_a_lab_being_changed_by_another_command_is_one_line_naming_it(own_lab_home, other_process):
    process = other_process(paths.state_dir() / "locks" / "demo.lock")
    with pytest.raises(LabStateError) as refused:
        with lifecycle.changing("demo"):
            pytest.fail("entered a lab another process is changing")
    assert refused.value.message.startswith(f"lab 'demo' is being changed by pid {process.pid} (`")
    assert "\n" not in refused.value.message and refused.value.hint
    with lifecycle.changing("other"):  # other labs are not held
        pass


def test_the_lab_lock_is_reentrant_in_its_command_and_released_after(own_lab_home):
    lock_file = paths.state_dir() / "locks" / "demo.lock"
    with lifecycle.changing("demo"):
        with lifecycle.changing("demo"):  # `up` calls `down` and `provision`, which take it too
            assert try_lock(lock_file) is None
        assert try_lock(lock_file) is None  # the inner block did not release the outer one
    lock = try_lock(lock_file)
    assert lock is not None
    lock.release()


def test_a_lab_lock_in_another_thread_is_refused(own_lab_home):
    inside, release, seen = threading.Event(), threading.Event(), []

    def hold():
        with lifecycle.changing("demo"):
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    inside.wait(10)
    try:
        with pytest.raises(LabStateError, match="is being changed"):
            with lifecycle.changing("demo"):
                seen.append("entered")
    finally:
        release.set()
        thread.join()
    assert seen == []


def test_names_that_are_no_lab_are_refused_before_any_file_is_touched(own_lab_home):
    for name in ("../x", "a/b", "", "UPPER"):
        with pytest.raises(SpecError, match="is not a lab name"):
            with lifecycle.changing(name):
                pass
    assert not (paths.state_dir() / "locks").exists()


def free_probe(port):
    """A probe that finds every port free, as two runs that probe at the same moment both would."""
    return port or next(EPHEMERAL)


EPHEMERAL = itertools.count(40000)


def test_two_runs_that_probe_at_once_get_different_ports(tmp_path):
    first, second = PortReservations(tmp_path / "ports"), PortReservations(tmp_path / "ports")
    assert choose_port(free_probe, None, "node0", first) == DEFAULT_MASTER_PORT
    other = choose_port(free_probe, None, "node0", second)
    assert other != DEFAULT_MASTER_PORT and other >= 40000
    first.release()  # the first run ended: 29500 is free for the next one
    assert choose_port(free_probe, None, "node0", PortReservations(tmp_path / "ports")) == DEFAULT_MASTER_PORT


def test_many_runs_starting_together_never_share_a_port(tmp_path):
    chosen, barrier = [], threading.Barrier(8)
    reservations = [PortReservations(tmp_path / "ports") for _ in range(8)]

    def run(index):
        barrier.wait()
        chosen.append(choose_port(lambda port: port or 41000 + index * 10 + len(chosen), None, "node0",
                                  reservations[index]))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(chosen) == 8 and len(set(chosen)) == 8 and DEFAULT_MASTER_PORT in chosen


def test_a_named_port_another_run_holds_is_an_error_naming_it(tmp_path):
    holding = PortReservations(tmp_path / "ports")
    assert choose_port(free_probe, 29600, "node0", holding) == 29600
    with pytest.raises(RunError, match=r"port 29600 on node0 is reserved by another run: pid \d+"):
        choose_port(free_probe, 29600, "node0", PortReservations(tmp_path / "ports"))
    # The same run's next step may name it again: it lets go of its own reservation first.
    assert choose_port(free_probe, 29600, "node0", holding) == 29600


def test_a_named_port_in_use_on_the_node_is_an_error_and_reserves_nothing(tmp_path):
    taken = PortReservations(tmp_path / "ports")
    with pytest.raises(RunError, match="port 29600 is already in use on node0"):
        choose_port(lambda port: -1, 29600, "node0", taken)
    assert taken.held is None and try_lock(taken.path(29600)) is not None


def test_the_default_port_taken_on_the_node_gives_a_free_reserved_one(tmp_path):
    reservations = PortReservations(tmp_path / "ports")
    port = choose_port(lambda port: -1 if port == DEFAULT_MASTER_PORT else port or 45123, None, "node0", reservations)
    assert port == 45123 and reservations.held.path == reservations.path(45123)
    assert try_lock(reservations.path(DEFAULT_MASTER_PORT)) is not None  # 29500 was let go


def test_no_free_port_at_all_is_an_error(tmp_path):
    with pytest.raises(RunError, match="found no free port"):
        choose_port(lambda port: -1, None, "node0", PortReservations(tmp_path / "ports"))


def test_host_runs_from_two_state_folders_never_share_a_port(tmp_path):
    """Processes on this host share its ports whichever `.lab/` (or test worker) started them."""
    first = LocalTransport(tmp_path / "one" / ".lab" / "local" / "shared", tmp_path)
    second = LocalTransport(tmp_path / "two" / ".lab" / "local" / "shared", tmp_path)
    try:
        assert first.pick_port() != second.pick_port()
    finally:
        first.ports.release()
        second.ports.release()


def test_a_lab_on_another_node_image_than_up_would_give_is_made_again_by_recreate():
    from lab.nodes.lifecycle import on_another_image
    assert on_another_image({"sha256:old"}, "sha256:new")  # rebuilt, or the lab upgraded since
    assert not on_another_image({"sha256:new"}, "sha256:new")
    assert on_another_image({"sha256:new", "sha256:old"}, "sha256:new")  # a node made again on its own earlier
    assert not on_another_image(set(), "sha256:new") and not on_another_image({"sha256:old"}, None)
