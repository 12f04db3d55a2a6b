"""A wheel built from this repository works with no checkout around it: exercises, playbooks and the
Dockerfile come from inside the installed package, state goes where `lab home` says.

The wheel is built offline (no build isolation, no index) from a copy of the sources, installed with
--no-deps into a fresh venv, and that venv sees the project venv's dependencies through a .pth file,
so nothing is downloaded and torch is not installed twice.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from lab import paths
from lab.jobs.exercises import discover

# One worker for the module's tests under pytest-xdist: they share the module's wheel and venv, made once.
pytestmark = pytest.mark.xdist_group("wheel_install")

NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", ".lab", "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache")
BUNDLED_FILES = ("exercises/exercise01_join/exercise.yaml", "playbooks/provision.yml", "docker/Dockerfile",
                 "docker/install-venv.sh")


def pip(*args):
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True,
                   timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    sources = tmp_path_factory.mktemp("sources") / "lab"
    shutil.copytree(paths.REPO_ROOT, sources, ignore=NOT_SOURCES)
    wheels = tmp_path_factory.mktemp("wheels")
    pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", str(wheels), str(sources))
    (built,) = wheels.glob("lab-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv holding only the wheel; the project's dependencies are visible, the checkout is not."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    pip("--python", str(python), "install", "--no-deps", "--no-index", str(wheel))
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # Written after the install, so pip never sees (or touches) the project venv's editable lab.
    project_sites = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    (site / "project-dependencies.pth").write_text("".join(f"{path}\n" for path in project_sites))
    return root, site


def installed_lab(venv, *args, cwd, lab_home=None):
    root, _ = venv
    env = {key: value for key, value in os.environ.items() if key not in ("LAB_HOME", "PYTHONPATH")}
    if lab_home:
        env["LAB_HOME"] = str(lab_home)
    return subprocess.run([root / "bin" / "lab", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_wheel_bundles_the_shipped_folders(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in BUNDLED_FILES:
        assert f"lab/_resources/{path}" in names
    assert not any(name.startswith(("bench/", "tests/")) for name in names)


def test_installed_lab_runs_from_its_own_package(venv, tmp_path):
    root, site = venv
    where = subprocess.run([root / "bin" / "python", "-c", "import lab; print(lab.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve() == (site / "lab" / "__init__.py").resolve()


def test_exercises_listed_from_the_bundle(venv, tmp_path):
    result = installed_lab(venv, "exercises", cwd=tmp_path, lab_home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.strip()]
    assert listed == [exercise.name for exercise in discover()]  # the checkout's twelve, found in the bundle


def test_home_says_which_state_folder_and_why(venv, tmp_path):
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)

    def home(cwd, lab_home=None):
        result = installed_lab(venv, "home", "--json", cwd=cwd, lab_home=lab_home)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    assert home(project) == {"path": str(project / ".lab"), "source": "new", "exists": False}
    (project / ".lab").mkdir()
    assert home(project / "sub") == {"path": str(project / ".lab"), "source": "found", "exists": True}
    assert home(project / "sub", lab_home=tmp_path / "elsewhere")["path"] == str(tmp_path / "elsewhere")
    plain = installed_lab(venv, "home", cwd=project / "sub")
    assert plain.returncode == 0 and plain.stdout.splitlines()[0] == str(project / ".lab")


def test_bench_without_a_checkout_is_one_error_with_a_hint(venv, tmp_path):
    result = installed_lab(venv, "bench", "--only", "up", cwd=tmp_path, lab_home=tmp_path / "home")
    assert result.returncode == 7
    assert [line.split(":")[0] for line in result.stderr.splitlines()] == ["error", "hint"], result.stderr


@pytest.mark.docker
def test_dry_run_plan_mounts_the_bundled_exercises(venv, tmp_path):
    _, site = venv
    result = installed_lab(venv, "up", "--dry-run", "--json", "--nodes", "2", "--name", "wheeldry", cwd=tmp_path,
                           lab_home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    bundled_exercises = str((site / "lab" / "_resources" / "exercises").resolve())
    assert bundled_exercises in json.dumps(plan), plan
