"""Build hook only (the metadata is in pyproject.toml): a built package carries the repository's
exercises/, playbooks/ and docker/ as lab/_resources/, which lab.paths.resource() reads first.

Editable installs skip the copy and keep reading the checkout's own folders.
"""

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from lab.paths import BUNDLED, REPO_ROOT, RESOURCES  # noqa: E402  (lab.paths needs only the standard library)

SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildPyWithResources(build_py):
    """build_py, then a fresh copy of each shipped folder into the build tree (stale files removed)."""

    def run(self):
        super().run()
        if self.editable_mode:
            return
        bundled = Path(self.build_lib) / BUNDLED.relative_to(REPO_ROOT)
        shutil.rmtree(bundled, ignore_errors=True)
        for name in RESOURCES:
            shutil.copytree(REPO_ROOT / name, bundled / name, ignore=SKIPPED)


setup(cmdclass={"build_py": BuildPyWithResources})
