"""Fixtures shared by the PR tests: the local GitHub REST server (``fake_github.FakeGithub``)."""

from __future__ import annotations

import pytest
from fake_github import DEFAULT_TOKEN, FakeGithub


@pytest.fixture
def fake_token() -> str:
    """The token the fake GitHub accepts: FakeGithub's default; a test module overrides this fixture to pick its own
    (tests that look for the token's leaks use one they can find)."""
    return DEFAULT_TOKEN


@pytest.fixture
def fake(fake_token: str):
    """A fresh local GitHub REST server on 127.0.0.1 for one test (pull request 7 of ``octo/rag``), accepting only
    ``fake_token``; ``fake.fail(...)`` scripts failures, ``fake.comments`` holds what was posted."""
    server = FakeGithub(token=fake_token).start()
    yield server
    server.stop()
