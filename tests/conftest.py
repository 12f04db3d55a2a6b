import os
import tempfile
import uuid

import pytest


def pytest_configure(config):
    """One LAB_HOME per test session, so no test touches a user's labs, keys or run records."""
    os.environ["LAB_HOME"] = tempfile.mkdtemp(prefix="lab-test-home-")


@pytest.fixture
def unique_name():
    return f"t{uuid.uuid4().hex[:8]}"
