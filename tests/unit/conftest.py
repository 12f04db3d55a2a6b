"""Fixtures shared by unit tests."""

import pytest


@pytest.fixture
def own_lab_home(tmp_path, monkeypatch):
    """A fresh state folder per test: wheelhouses, logs and caches must not leak between tests."""
    monkeypatch.setenv("LAB_HOME", str(tmp_path / "lab-home"))
