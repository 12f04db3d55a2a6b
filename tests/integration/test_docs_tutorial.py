"""The tutorial "Your first lab" (docs/tutorials/first-lab.md), run as a reader would: its files written, its
commands run in order on a real lab, and each output line the page shows found in what the command printed (times,
addresses, ports and run ids aside)."""

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lab.cli import cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "first-lab.md"

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def page_files(text: str) -> dict[str, str]:
    """The files the page asks the reader to save: ```python title="NAME" blocks."""
    return dict(re.findall(r'```python title="([^"]+)"\n(.*?)```', text, re.S))


def page_commands(text: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines the page shows after it) for every `$ ` line of the page's console blocks."""
    steps = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps and line.strip() and line.strip() != "...":
                steps[-1][1].append(line)
    return steps


def normalised(text: str, lab_name: str) -> str:
    """What may differ from run to run made the same: numbers, the state folder's place, the lab's name, spacing."""
    text = text.replace(f"'{lab_name}'", "'default'")
    text = re.sub(r"\S*/\.lab/", ".lab/", text)
    text = re.sub(r"\d+", "0", text)
    return re.sub(r"\s+", " ", text).strip()


def with_lab_name(command: str, lab_name: str) -> str:
    """The page's `lab ...` command on this test's own lab: --name added where the command takes it."""
    words = command.split()
    if words[0] != "lab" or len(words) < 2:
        return command
    sub = cli.get_command(None, words[1])
    takes_name = sub is not None and any("--name" in getattr(param, "opts", []) for param in sub.params)
    return " ".join(words[:2] + ["--name", lab_name] + words[2:]) if takes_name else command  # before a script's args


def test_first_lab_tutorial_prints_what_the_page_shows(tmp_path):
    text = PAGE.read_text()
    steps = page_commands(text)
    assert [command.split()[:2] for command, _ in steps if command.startswith("lab")] == [
        ["lab", "up"], ["lab", "status"], ["lab", "exercises"], ["lab", "run"], ["lab", "torchrun"],
        ["lab", "torchrun"], ["lab", "explain"], ["lab", "down"]]
    lab_name = f"docs{uuid.uuid4().hex[:6]}"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lab"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lab.cli "$@"\n')
    shim.chmod(0o755)
    # The state folder the page's reader gets: .lab/ in the folder they work in (set, as a parent folder's .lab/ would
    # be found first).
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT), "COLUMNS": "200",
           "LAB_HOME": str(tmp_path / "proj" / ".lab")}
    (tmp_path / "proj").mkdir()
    for name, content in page_files(text).items():
        (tmp_path / "proj" / name).write_text(content)
    cwd = tmp_path
    try:
        for command, shown in steps:
            command = with_lab_name(command, lab_name)
            result = subprocess.run(["bash", "-c", f'{command}\nstatus=$?; echo "__cwd__=$PWD"; exit $status'],
                                    cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
            printed = result.stdout + result.stderr
            cwd = Path(re.findall(r"__cwd__=(.*)", result.stdout)[-1])
            actual = normalised(printed.replace(f"__cwd__={cwd}", ""), lab_name)
            missing = [line for line in shown if normalised(line, lab_name) not in actual]
            assert not missing, f"`{command}` did not print, as the page shows:\n" + "\n".join(missing) + \
                f"\n--- it printed (exit {result.returncode}):\n{printed[-4000:]}"
    finally:
        subprocess.run([sys.executable, "-m", "lab.cli", "down", "--name", lab_name], cwd=tmp_path / "proj", env=env,
                       capture_output=True, timeout=300)
