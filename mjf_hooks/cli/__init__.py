"""The ``mjf`` command: the click-free subcommands - hooks (:mod:`.hook_commands`), what a
node's timer runs (:mod:`.node_commands`), a pilot's update (:mod:`.mjf_status_set`), a
fast `mjf describe` (:mod:`.mjf_describe`) - and the interactive ones (click), one module
per subject."""
