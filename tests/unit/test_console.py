"""What a person reads during a run: whole lines, a node/rank prefix on each, repeated warnings folded into a count."""

import os
import re
import signal
import string
import subprocess
import sys

import pytest

from lab.cli.console import LiveReporter, UntilDone, repeat_key, split_rank
from lab.jobs.exercises import LaunchContext, exercises_root, readable_output_env, torchrun_argv

C10D_RETRY = ("[W1123 10:18:{second:02d}.{micros:06d}000 socket.cpp:767] [c10d] The client socket has failed to connect "
              "to [{host}]:12355 (errno: 99 - Cannot assign requested address).")


def retry(second: int, host: str = "localhost") -> str:
    return C10D_RETRY.format(second=second, micros=second * 7919 % 1000000, host=host)


@pytest.fixture
def printed(capsys):
    """The console lines printed so far, without colour codes."""
    return lambda: [line.rstrip() for line in capsys.readouterr().out.splitlines()]


@pytest.mark.parametrize("text, label, rest", [
    ("[rank3]:epoch 1", "r3", "epoch 1"),  # torchrun --tee with the lab's template
    ("[rank 3] epoch 1", "r3", "epoch 1"),  # the exercises' labkit.log
    ("[rank1]:[rank 1] group rank 0", "r1", "group rank 0"),  # an exercise under torchrun --tee: one prefix
    ("[rank0]:[rank0]: Traceback (most recent call last):", "r0", "Traceback (most recent call last):"),  # excepthook
    ("[rank2]:[W1123 10:18:20.1 socket.cpp:767] [c10d] x", "r2", "[W1123 10:18:20.1 socket.cpp:767] [c10d] x"),
    ("[default1]:hello", "l1", "hello"),  # torchrun's default tag names the local rank
    ("[rank0]:[rank 1] tagged twice, differently", "r0", "[rank 1] tagged twice, differently"),
    ("no rank here [rank 1]", "", "no rank here [rank 1]"),
    ("[ranking] 3", "", "[ranking] 3"),
])
def test_a_ranks_tags_become_one_label(text, label, rest):
    assert split_rank(text) == (label, rest)


def test_torchrun_tags_every_workers_lines_as_the_console_reads_them():
    ctx = LaunchContext(node_rank=1, nnodes=2, nproc_per_node=2, master_addr="node0", master_port=29500,
                        python="/py", exercises_dir="/ex", results_dir="/r", work_dir="/w", run_id="run1")
    assert "--tee=3" in torchrun_argv(ctx)
    template = readable_output_env("/ex", {})["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"]
    tag = string.Template(template).safe_substitute(role_name="default", local_rank=1, rank=3)  # as torch fills it
    assert split_rank(f"{tag}[rank 3] group rank 1") == ("r3", "group rank 1")


def test_every_printed_line_gets_its_node_and_rank_prefix(printed):
    reporter = LiveReporter(quiet=False)
    reporter.line(1, "[rank2]:[rank 2] group rank 1, local rank 0, backend gloo")
    reporter.line(0, "torchrun agent says hello")
    reporter.line(1, "[default1]:local only")
    assert printed() == [" node1 r2 | group rank 1, local rank 0, backend gloo",
                         "    node0 | torchrun agent says hello",
                         " node1 l1 | local only"]


def test_repeats_differ_only_in_timestamps_addresses_and_a_log_records_numbers():
    assert repeat_key(retry(1)) == repeat_key(retry(59, host="127.0.0.1")) == repeat_key(retry(7, host="::1"))
    assert repeat_key("WARNING:torch.distributed:retry 3 of 10") == repeat_key("WARNING:torch.distributed:retry 4 of 10")
    assert repeat_key("waiting for node 10.0.0.3:29500") == repeat_key("waiting for node 10.0.0.4:29501")
    # a program's own lines are news when their numbers change
    assert repeat_key("[rank 0] epoch 1: mean loss 0.6931") != repeat_key("[rank 0] epoch 2: mean loss 0.6012")
    refused = retry(1).replace("errno: 99 - Cannot assign requested address", "errno: 111 - Connection refused")
    assert repeat_key(retry(1)) != repeat_key(refused)


def test_a_repeated_warning_is_printed_once_then_counted(printed):
    reporter = LiveReporter(quiet=False)
    reporter.line(1, "[rank1]:starting")
    for second in range(300):
        reporter.line(1, f"[rank1]:{retry(second % 60)}")
    reporter.line(1, "[rank1]:connected")
    assert printed() == [" node1 r1 | starting",
                         f" node1 r1 | {retry(0)}",
                         " node1 r1 | (repeated 299 more times)",
                         " node1 r1 | connected"]


def test_interleaved_ranks_fold_their_own_repeats_and_hide_no_distinct_line(printed):
    reporter = LiveReporter(quiet=False)
    for epoch in range(5):
        reporter.line(0, f"[rank0]:{retry(epoch)}")
        reporter.line(0, f"[rank1]:epoch {epoch}: mean loss {1 / (epoch + 1):.4f}")
        reporter.line(1, f"[rank2]:{retry(epoch, host='127.0.0.1')}")
    reporter.line(0, "[rank0]:joined")
    lines = printed()
    assert [line for line in lines if "r1 |" in line] == [f" node0 r1 | epoch {e}: mean loss {1 / (e + 1):.4f}"
                                                          for e in range(5)]
    assert [line for line in lines if "node0 r0" in line] == [  # lines came between: the count quotes its line
        f" node0 r0 | {retry(0)}", f" node0 r0 | (repeated 4 more times: {retry(0)[:57]}...)", " node0 r0 | joined"]
    assert [line for line in lines if "node1" in line] == [f" node1 r2 | {retry(0, host='127.0.0.1')}"]  # not ended yet


def test_the_count_is_shown_when_the_run_moves_on_or_ends(printed):
    with LiveReporter(quiet=False) as reporter:
        for second in range(3):
            reporter.line(0, retry(second))
        reporter.event("step 'next' on 2 node(s)")
        reporter.line(0, retry(9))  # after the event the same warning is news again
        reporter.line(0, retry(10))
    assert printed() == [f"    node0 | {retry(0)}",
                         "    node0 | (repeated 2 more times)",
                         ">> step 'next' on 2 node(s)",
                         f"    node0 | {retry(9)}",
                         "    node0 | (repeated 1 more time)"]


def test_quiet_prints_no_lines(printed):
    with LiveReporter(quiet=True) as reporter:
        reporter.line(0, retry(1))
        reporter.line(0, retry(2))
    assert printed() == []


WRITER = """
import sys
tag = sys.argv[1]
for i in range(5000):
    print(tag, "line", i, "x" * 60)  # five write() calls per line when unbuffered
    print(tag, "err", i, file=sys.stderr)
"""


def test_processes_sharing_one_pipe_never_merge_lines(tmp_path):
    """Two Python processes on one pipe, as torchrun workers or mp.spawn children share a node's: whole lines only.

    PYTHONUNBUFFERED=1, which the lab used to set and a user may still set, is the worst case: the job's
    sitecustomize must win over it.
    """
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = readable_output_env(str(exercises_root()), {"PYTHONUNBUFFERED": "1", "PATH": "/usr/bin:/bin"})
    python = [sys.executable, str(script)]
    shell = f"{' '.join(python)} AAA & {' '.join(python)} BBB & wait"
    output = subprocess.run(["sh", "-c", shell], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, timeout=120).stdout.splitlines()
    whole = re.compile(r"^(AAA|BBB) (line \d+ x{60}|err \d+)$")
    assert len(output) == 20000
    assert [line for line in output if not whole.match(line)] == []


def test_a_job_keeps_the_users_pythonpath_and_sitecustomize(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.users_site_ran = True\n")
    (tmp_path / "mylib.py").write_text("VALUE = 42\n")
    env = readable_output_env(str(exercises_root()), {"PYTHONPATH": str(tmp_path), "PYTHONUNBUFFERED": "1"})
    probe = ("import sys, mylib; print(sys.stdout.line_buffering, sys.stdout.write_through, "
             "sys.stderr.line_buffering, getattr(sys, 'users_site_ran', False), mylib.VALUE)")
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["True", "False", "True", "True", "42"], result.stderr
    assert env["PYTHONPATH"].split(":") == [f"{exercises_root()}/jobhooks", str(tmp_path)]
    assert env["LAB_JOBHOOKS_DIR"] == f"{exercises_root()}/jobhooks"  # the node image's venv puts it first itself


def _bytecodes() -> None:
    for _ in range(1000):
        pass


def test_ctrl_c_interrupts_a_command_until_its_work_is_done_then_is_ignored_then_armed_again():
    # Armed as in an interactive shell: a suite started in the background begins with SIGINT ignored.
    started_with = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with UntilDone():
                os.kill(os.getpid(), signal.SIGINT)
                _bytecodes()
        with UntilDone() as command:
            command.done()  # the lab is whole
            os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt at the next bytecode
            _bytecodes()
            printed = "lab 'demo' up in 2.4 s"
        assert printed and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            _bytecodes()
    finally:
        signal.signal(signal.SIGINT, started_with)
