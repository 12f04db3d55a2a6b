import os
import tempfile
import uuid

import pytest

SESSION_HOME = "LAB_TEST_SESSION_HOME"  # the session's LAB_HOME, passed on to pytest-xdist's workers


def pytest_configure(config):
    """One LAB_HOME per test session, shared by its xdist workers (they inherit it from the controller), so no test
    touches a user's labs, keys or run records, and the workers share one cache of wheels and resolutions."""
    home = os.environ.get(SESSION_HOME) if os.environ.get("PYTEST_XDIST_WORKER") else None
    if not home:
        home = tempfile.mkdtemp(prefix="lab-test-home-")
        os.environ[SESSION_HOME] = home
    os.environ["LAB_HOME"] = home


@pytest.fixture
def unique_name():
    return f"t{uuid.uuid4().hex[:8]}"
