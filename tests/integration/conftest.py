"""Fixtures shared by the real batch systems' test modules."""

from __future__ import annotations

import pytest

from tests.integration import hostile


@pytest.fixture
def target(batch):
    """For a hostile-user module (its ``batch``): a root file outside base_dir that no hook
    may write, follow or remove."""
    with hostile.precious_target(batch.root) as path:
        yield path
