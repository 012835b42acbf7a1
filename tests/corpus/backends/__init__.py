"""Each batch system's entry points of the bad-input corpus, one file per name in
``mjf_hooks.batch.NAMES`` (tests/unit/test_batch_contract.py checks there is one): its
recorded environments and config, how each role is called, what runs first."""

import importlib

from mjf_hooks import batch

ENTRIES = [entry for name in batch.NAMES
           for entry in importlib.import_module(f"tests.corpus.backends.{name}").ENTRIES]
