import os
import shutil
import tempfile
import uuid

import pytest

try:
    from _pytest.nodeid import coerce_node_id  # pytest 9
except ImportError:  # an older pytest reads the "@G" pytest-xdist adds itself
    coerce_node_id = None

SESSION_HOME = "LAB_TEST_SESSION_HOME"  # the session's LAB_HOME, passed on to pytest-xdist's workers
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
    os.environ["LAB_HOME"] = home
    # a diagnosis rule that raises fails its test (users get the other rules' findings and a log of it)
    os.environ.setdefault("LAB_DIAGNOSIS_STRICT", "1")
    # lab's plugin names the session's labs PREFIX-<token>-<n>: the suite's prefix, on an engine shared with others.
    if config.getoption("lab_name_prefix", default="unset") is None:
        config.option.lab_name_prefix = os.environ.get("LAB_TEST_NAME_PREFIX", "it")


@pytest.hookimpl(trylast=True)  # after lab's plugin has taken the session's labs down
def pytest_sessionfinish(session, exitstatus):
    """The session's LAB_HOME (its runs, logs and cached wheels: about 300 MB) goes with a session that passed (or
    ran nothing); a failed one keeps it, named, for the records of what failed."""
    home = os.environ.get(SESSION_HOME)
    if os.environ.get("PYTEST_XDIST_WORKER") or not home:
        return
    if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        shutil.rmtree(home, ignore_errors=True)
    else:
        print(f"\nthe session's LAB_HOME, with its run records, is kept: {home}")


def pytest_collection_modifyitems(config, items):
    """The long files first, then the other files with Docker tests, then the rest, each file's tests in their order:
    under pytest-xdist (which hands out tests in this order) the tests left for the end are short ones, so no worker
    still runs a long one while the others have nothing left. Then the xdist groups are named (name_xdist_groups)."""

    def rank(path: str) -> tuple[int, int]:
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
