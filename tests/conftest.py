import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

try:
    from _pytest.nodeid import coerce_node_id  # pytest 9
except ImportError:  # an older pytest reads the "@G" pytest-xdist adds itself
    coerce_node_id = None

SESSION_HOME = "LAB_TEST_SESSION_HOME"  # the session's LAB_HOME, passed on to pytest-xdist's workers
# A folder while the session builds the node image beside the tests without Docker (start_node_image_build): the
# build's log, and its exit status in `rc` once it ended. Passed on to the workers, like SESSION_HOME.
IMAGE_BUILD = "LAB_TEST_IMAGE_BUILD"
IMAGE_BUILD_LIMIT_S = 1800
# The files whose tests ran longest (bench/RESULTS.md, "The suite under xdist: where the time goes"), longest first.
LONG_FILES = ("tests/integration/test_pytest_plugin.py", "tests/integration/test_trials.py",
              "tests/integration/test_exercises.py", "tests/integration/test_diagnosis.py",
              "tests/integration/test_adhoc.py", "tests/integration/test_concurrency.py")


def pytest_configure(config):
    """One LAB_HOME per test session, shared by its xdist workers (they inherit it from the controller), so no test
    touches a user's labs, keys or run records, and the workers share one cache of wheels and resolutions."""
    home = os.environ.get(SESSION_HOME) if os.environ.get("PYTEST_XDIST_WORKER") else None
    if not home:
        home = tempfile.mkdtemp(prefix="lab-test-home-")
        os.environ[SESSION_HOME] = home
        os.environ.pop(IMAGE_BUILD, None)
        start_node_image_build(config, Path(home))
    os.environ["LAB_HOME"] = home
    # a diagnosis rule that raises fails its test (users get the other rules' findings and a log of it)
    os.environ.setdefault("LAB_DIAGNOSIS_STRICT", "1")
    # lab's plugin names the session's labs PREFIX-<token>-<n>: the suite's prefix, on an engine shared with others.
    if config.getoption("lab_name_prefix", default="unset") is None:
        config.option.lab_name_prefix = os.environ.get("LAB_TEST_NAME_PREFIX", "it")


def start_node_image_build(config, home: Path) -> None:
    """On a machine without the node image (a fresh one: `make test` no longer builds it first), build it in the
    background while the tests without Docker run: its minute of downloads and disk overlaps their CPU. The user's
    own state folder (the wheelhouse `make demo` shares), not the session's."""
    if "not docker" in (config.getoption("markexpr", default="") or "") or not asks_for_docker_tests(config):
        return
    try:
        from lab.errors import LabError
        from lab.nodes.driver import connect
        from lab.nodes.image import DockerBaseEngine, node_image_tag

        if DockerBaseEngine(connect()).has_image(node_image_tag()):
            return
    except (ImportError, LabError):
        return  # no engine, or no torch: the Docker tests say so themselves
    folder = home / "node-image-build"
    folder.mkdir()
    log = folder / "log"
    subprocess.Popen(["sh", "-c", '"$0" -m lab.cli image build >"$1" 2>&1; echo $? >"$2.tmp"; mv "$2.tmp" "$2"',
                     sys.executable, str(log), str(folder / "rc")], start_new_session=True,
                     env={key: value for key, value in os.environ.items() if key != SESSION_HOME})
    os.environ[IMAGE_BUILD] = str(folder)
    print(f"building the node image beside the tests without Docker (log: {log})", file=sys.stderr)


def asks_for_docker_tests(config) -> bool:
    """Whether the command line's paths hold (or lie inside) the folders of the Docker tests."""
    here = Path(__file__).parent
    folders = [here / "integration", here / "ranks"]
    for arg in config.args or ["."]:
        path = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if any(folder.is_relative_to(path) or path.is_relative_to(folder) for folder in folders):
            return True
    return False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A Docker test waits for the node image the session is building (before any fixture brings up a lab)."""
    if item.get_closest_marker("docker"):
        wait_for_node_image()


def wait_for_node_image() -> None:
    folder = os.environ.get(IMAGE_BUILD)
    if not folder:
        return
    status = Path(folder) / "rc"
    deadline = time.monotonic() + IMAGE_BUILD_LIMIT_S
    while not status.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the node image's build did not end in {IMAGE_BUILD_LIMIT_S} s (log: {folder}/log)",
                        pytrace=False)
        time.sleep(1)
    code = int(status.read_text().strip() or 1)
    if code:
        tail = "".join((Path(folder) / "log").read_text(errors="replace").splitlines(True)[-15:])
        pytest.fail(f"the node image's build failed (exit {code}, log: {folder}/log):\n{tail}", pytrace=False)
    os.environ.pop(IMAGE_BUILD)  # built: this process's next Docker tests need not look


def pytest_collection_modifyitems(config, items):
    """The long files first, then the other files with Docker tests, then the rest, each file's tests in their order:
    under pytest-xdist (which hands out tests in this order) the tests left for the end are short ones, so no worker
    still runs a long one while the others have nothing left. While the session builds the node image, the tests
    without Docker go first instead. Then the xdist groups are named (name_xdist_groups)."""
    image_first = bool(os.environ.get(IMAGE_BUILD))

    def rank(path: str) -> tuple[int, int]:
        if image_first and path not in with_docker:
            return -1, 0
        if path in LONG_FILES:
            return 0, LONG_FILES.index(path)
        return (1 if path in with_docker else 2), 0

    files = [item.nodeid.split("::")[0] for item in items]
    with_docker = {path for path, item in zip(files, items) if item.get_closest_marker("docker")}
    order = {id(item): rank(path) for path, item in zip(files, items)}
    items.sort(key=lambda item: order[id(item)])  # stable: a file's tests stay together, in their order
    name_xdist_groups(config, items)


def name_xdist_groups(config, items) -> None:
    """`--dist loadgroup`: a test marked xdist_group("G") goes to the worker of the other tests of G. pytest-xdist 3.8
    says so by adding "@G" to the test's `_nodeid`, which pytest 9 no longer reads (its node ids live in `_id`): a
    worker here does it where pytest 9 reads it, or the groups' tests would be spread over the workers."""
    if coerce_node_id is None or not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted({str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                         for mark in item.iter_markers("xdist_group")})
        if groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture
def unique_name():
    return f"t{uuid.uuid4().hex[:8]}"
