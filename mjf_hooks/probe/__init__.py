"""Read-only facts about this host and this job's cgroup.

Each probe has a pure function that parses the text of a file and a thin
reader at the edge that opens the file, so tests feed recorded text.
"""

from __future__ import annotations


def read_text(path: str) -> str | None:
    """The content of a small kernel or config file, or None if it cannot be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (OSError, ValueError):  # ValueError: a path with a NUL byte (from the environment)
        return None
    # As text mode would read it, without the codec lookup that imports encodings.ascii.
    return data.decode("ascii", "replace").replace("\r\n", "\n").replace("\r", "\n")
