"""The hooks a batch system runs, one module per batch system (click-free: the start-up
budget, docs/design.md "The contract"), on the frame they share (:mod:`.frame`); a pre-start
hook with a job starter (:mod:`.starter`, LSF and Grid Engine); and `mjf run`, a job
without a batch system (:mod:`.standalone`)."""
