"""Whole lines from two streams, mended where torchrun's tailer cut a worker's line in two."""

import subprocess
import sys

from lab.lines import STDERR, STDOUT, LineAssembler, pipe_lines


def feed_all(assembler, *chunks):
    return [line for stream, chunk in chunks for line in assembler.feed(stream, chunk)] + assembler.close()


def test_lines_split_across_chunks_come_out_whole_and_each_stream_keeps_its_own_text():
    lines = feed_all(LineAssembler(), (STDOUT, b"epoch 1: lo"), (STDERR, b"warning: "), (STDOUT, b"ss 0.5\nepoch 2"),
                     (STDERR, b"slow\r\n"))
    assert lines == ["epoch 1: loss 0.5", "warning: slow", "epoch 2"]


def test_a_tag_whose_line_was_cut_gets_its_rest_from_the_same_tag_later_on_the_same_stream():
    # The tailer copied rank 2's "ERR" (the rest not yet in the file), then rank 3's whole line, then rank 2's rest;
    # meanwhile stdout carried rank 2's other lines.
    lines = feed_all(LineAssembler(),
                     (STDERR, b"[rank2]:ERR[rank3]:ERR rank=3 i=9\n"),
                     (STDOUT, b"[rank2]:LINE rank=2 i=5\n"),
                     (STDERR, b"[rank2]: rank=2 i=5\n"))
    assert lines == ["[rank3]:ERR rank=3 i=9", "[rank2]:LINE rank=2 i=5", "[rank2]:ERR rank=2 i=5"]


def test_a_cut_mended_on_one_line_and_torchs_default_tag():
    assert feed_all(LineAssembler(), (STDOUT, b"[default0]:step 1[default0]:0 done\n")) == ["[default0]:step 10 done"]


def test_stacked_tags_of_one_line_stay_and_plain_text_is_left_alone():
    lines = feed_all(LineAssembler(), (STDERR, b"[rank1]:[rank1]: Traceback (most recent call last):\n"),
                     (STDOUT, b"loss [0.1, 0.2] at rank 3: ok\n"))
    assert lines == ["[rank1]:[rank1]: Traceback (most recent call last):", "loss [0.1, 0.2] at rank 3: ok"]


def test_text_whose_rest_never_came_is_still_returned_at_the_end():
    lines = feed_all(LineAssembler(), (STDOUT, b"[rank0]:half[rank1]:whole\n"), (STDOUT, b"no newline"))
    assert sorted(lines) == ["[rank0]:half", "[rank1]:whole", "no newline"]


def test_pipe_lines_reads_both_pipes_of_a_real_process_to_the_end():
    script = "import sys\nfor i in range(2000):\n    print('out', i)\n    print('err', i, file=sys.stderr)\n"
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = list(pipe_lines(process.stdout, process.stderr))
    process.wait()
    assert sorted(lines) == sorted([f"out {i}" for i in range(2000)] + [f"err {i}" for i in range(2000)])
