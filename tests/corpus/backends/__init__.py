"""Each batch system's entry points of the bad-input corpus, one file per name in
``mjf_hooks.batch.NAMES`` (tests/unit/test_batch_contract.py checks there is one): its
recorded environments and config, how each role is called, what runs first; and its part
of the model (``tests.corpus.mutations``, which names no batch system), handed over here.

A file holds ``ENTRIES`` (:class:`~tests.corpus.entries.Entry` objects, each with its
model: exit statuses, store role, the hooks that say what its batch system's input does)
and, where it has them, ``MODELS`` (entry points it runs otherwise, as the pure-sh
TaskProlog), ``CONFIG_KEYS`` (its config section's keys and what each takes),
``COMMANDS`` (its fake batch-system commands), ``ALSO_NAMED`` (what a line about one of
its variables may name instead) and ``ENV_FILE_CULPRITS`` (what a line about a broken
--env-file may name)."""

import importlib

from mjf_hooks import batch
from tests.corpus import mutations

ENTRIES = []
for _name in batch.NAMES:
    _module = importlib.import_module(f"tests.corpus.backends.{_name}")
    ENTRIES += _module.ENTRIES
    mutations.declare(
        [*_module.ENTRIES, *getattr(_module, "MODELS", ())],
        config_keys=getattr(_module, "CONFIG_KEYS", None),
        commands=getattr(_module, "COMMANDS", None),
        also_named=getattr(_module, "ALSO_NAMED", None),
        env_file_culprits=getattr(_module, "ENV_FILE_CULPRITS", ()))
