"""The ``mjf`` command: the click-free subcommands that are hooks (:mod:`.hook_commands`)
and the interactive ones (click), one module per subject."""
