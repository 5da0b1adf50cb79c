"""Fixtures shared by the judge tests: the local OpenAI-compatible server (``fake_openai.FakeOpenAI``)."""

from __future__ import annotations

import pytest
from fake_openai import FakeOpenAI


@pytest.fixture
def fake():
    """A fresh local OpenAI-compatible server on 127.0.0.1 for one test (HTTP 500 for every unscripted request).

    Set ``fake.responder`` or call ``fake.script(...)`` to choose the answers.
    """
    with FakeOpenAI() as server:
        yield server
