"""Programs that run inside the cgroup v2 VM (:mod:`tests.integration.cgroup2_vm`).

Each runs as the VM's first process's child, as root, with the chroot's own ``python3``
(``python3 -m tests.integration.guest.NAME SHARE`` from the checkout, which the VM
mounts at its own path): the standard library only, no pytest. What the host's test
prepared is in the share (``plan.json``, ``dump.py``); what the program saw goes to
``results.json`` there, which the host's test asserts on.
"""
