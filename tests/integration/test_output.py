"""What a person reads during `lab torchrun` on a real 2-node lab: whole lines, each with its one node/rank prefix,
and a repeated message folded into a count on the console while the run record keeps every line."""

import re
from pathlib import Path

import pytest

from .conftest import lab

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LINES, REPEATS = 300, 30

# Many lines per rank on stdout and stderr at once, each print in several parts (several write() calls when
# unbuffered); then one message repeated with a changing address, as a retry loop prints it.
CHATTY_SCRIPT = f"""
import os, sys, time
rank = os.environ["RANK"]
for i in range({LINES}):
    print("LINE", f"rank={{rank}}", f"i={{i}}", "x" * 40)
    print("ERR", f"rank={{rank}}", f"i={{i}}", file=sys.stderr)
sys.stdout.flush()
# A line written in two parts with a pause: torchrun's tailer copies the first part with its tag, then the rest
# behind the tag again, with another line of the same rank on the other stream in between.
sys.stderr.write(f"CUT rank={{rank}}")
sys.stderr.flush()
time.sleep(0.5)
print(f"BETWEEN rank={{rank}}", flush=True)
time.sleep(0.3)
print(" i=rest", file=sys.stderr)
time.sleep(1)  # stderr's lines arrive before the repeats start
for i in range({REPEATS}):
    print(f"REPEAT rank={{rank}}: store not reachable at 127.0.0.1:{{29500 + i}}")
"""

CONSOLE_LINE = re.compile(r"^\s*node(\d+)(?: r(\d+))? \| (.*)$")


def test_every_line_of_every_rank_is_whole_and_carries_its_node_and_rank(two_nodes, tmp_path):
    script = tmp_path / "chatty" / "chatty.py"
    script.parent.mkdir()
    script.write_text(CHATTY_SCRIPT)
    result = lab("torchrun", "--name", two_nodes, "--nproc-per-node", "2", str(script), timeout=300, check=True)

    shown: dict[str, list[str]] = {}  # the script's kind of line -> "node rank | text" as the console showed it
    folded: dict[str, int] = {}  # rank -> repeats the console folded into a count
    for line in result.stdout.splitlines():
        if "rank=" not in line and "(repeated" not in line:
            continue
        match = CONSOLE_LINE.match(line)
        assert match and match[2] is not None, f"no node/rank prefix: {line!r}"
        node, rank, text = int(match[1]), match[2], match[3]
        if text.startswith("(repeated"):
            folded[rank] = folded.get(rank, 0) + int(re.search(r"\d+", text)[0])
            continue
        assert text.count("rank=") == 1, f"two ranks' text on one line: {line!r}"
        assert re.search(rf"\brank={rank}\b", text) and node == int(rank) // 2, f"wrong prefix: {line!r}"
        assert "[rank" not in text, f"a rank tag left in: {line!r}"
        kind = text.split()[0]
        shown.setdefault(kind, []).append(f"{node} {rank} | {text}")

    for kind, pattern in (("LINE", r"LINE rank=\d i=\d+ x{40}"), ("ERR", r"ERR rank=\d i=\d+")):
        assert len(shown[kind]) == 4 * LINES, kind  # a program's lines are never folded, whatever their numbers
        assert all(re.fullmatch(rf"\d \d \| {pattern}", line) for line in shown[kind])
    for kind, pattern in (("CUT", r"CUT rank=\d i=rest"), ("BETWEEN", r"BETWEEN rank=\d")):  # the cut line mended
        assert len(shown[kind]) == 4 and all(re.fullmatch(rf"\d \d \| {pattern}", line) for line in shown[kind]), kind
    for rank in "0123":
        repeats_shown = sum(line.startswith(f"{int(rank) // 2} {rank} |") for line in shown["REPEAT"])
        assert folded.get(rank, 0) > 0 and repeats_shown + folded[rank] == REPEATS, (rank, repeats_shown, folded)

    record = Path(re.search(r"record: (\S+)", result.stdout)[1])
    logs = "".join(path.read_text() for path in (record / "logs").glob("node*.log"))
    assert all(line.count("rank=") <= 1 for line in logs.splitlines())
    assert len(re.findall(r"^\[rank\d\]:REPEAT rank=\d", logs, re.MULTILINE)) == 4 * REPEATS  # the record keeps all
