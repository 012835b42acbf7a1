"""A job for the job-record tests: keeps two CPUs busy for a known CPU time, touches a
known amount of memory, and writes what it saw and measured.

Run inside a batch job as ``python3 record_job.py OUT CPU_SECS_PER_CHILD MIB``: two
children each burn CPU_SECS_PER_CHILD of CPU time (by their own clock) while the job
holds MIB MiB, every page touched; OUT (JSON) gets the job's features, its wall time
and the CPU time the kernel accounted to it (its own and its children's rusage).
Standard library only: it runs with each batch system's python3.
"""

import json
import os
import resource
import sys
import time

out, per_child, mib = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
start = time.time()
features = {}
directory = os.environ.get("JOBFEATURES")
if directory and os.path.isdir(directory):
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as handle:
            features[name] = handle.read()
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        began = time.process_time()
        while time.process_time() - began < per_child:
            pass
        os._exit(0)
    children.append(pid)
block = bytearray(mib * 2**20)
for offset in range(0, len(block), 4096):
    block[offset] = 1
for pid in children:
    os.waitpid(pid, 0)
used = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
result = {"features": features, "start": start, "end": time.time(),
          "cpu_secs": sum(usage.ru_utime + usage.ru_stime for usage in used),
          "maxrss_kib": used[0].ru_maxrss, "jobfeatures": directory}
with open(out + ".tmp", "w") as handle:
    json.dump(result, handle)
os.rename(out + ".tmp", out)
