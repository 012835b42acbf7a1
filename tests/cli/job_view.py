"""What the test jobs that the hook commands start run, to show what they were given."""

from __future__ import annotations


def show_script(*variables: str) -> str:
    """Python code for a job that prints, as JSON, its argv, $MACHINEFEATURES,
    $JOBFEATURES and ``variables``, and its jobfeatures/ files."""
    shown = ("MACHINEFEATURES", "JOBFEATURES", *variables)
    return ("import json, os, sys\n"
            "d = os.environ.get('JOBFEATURES')\n"
            "print(json.dumps({'argv': sys.argv[1:], 'env': {k: os.environ.get(k) for k in "
            f"{shown!r}}}, 'job': {{n: open(os.path.join(d, n)).read() "
            "for n in sorted(os.listdir(d))} if d else None}))\n")


# A shell job that prints its $JOBSTATUS, whether it is a directory, what it holds, and
# its $JOBFEATURES.
STATUS_SHOW = ('echo "${JOBSTATUS-unset}"; test -d "${JOBSTATUS-}" && echo directory; '
               'ls -A "${JOBSTATUS-/nonexistent}" 2>/dev/null | wc -l; echo "$JOBFEATURES"')
