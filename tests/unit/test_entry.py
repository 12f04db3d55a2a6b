"""Ctrl-C while the `lab` command is still loading: one line and exit 130, as later, never an import traceback."""

import signal
import subprocess
import sys

# A real SIGINT, sent to the process at the moment the CLI's import reaches click.
INTERRUPTED_WHILE_LOADING = """
import importlib.abc, os, signal, sys

class InterruptAtClick(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "click":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, InterruptAtClick())
sys.argv = ["lab", "home"]
from lab.entry import main
main()
"""


def test_ctrl_c_while_the_cli_loads_exits_130_with_one_line():
    # SIGINT armed as in a terminal's foreground job (a background shell starts children with it ignored).
    result = subprocess.run([sys.executable, "-c", INTERRUPTED_WHILE_LOADING], capture_output=True, text=True,
                            timeout=60, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr and result.stderr.strip().startswith("interrupted"), result.stderr


def test_the_console_script_is_the_entry_point():
    import tomllib
    from pathlib import Path

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["lab"] == "lab.entry:main"
