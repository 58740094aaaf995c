#!/usr/bin/env python3
# scripts/uringspike/drive.py: the workloads scripts/uringspike/bench.sh times.
#
#   drive.py create DIR N     create N files in DIR (open O_CREAT + a 100-byte
#                             write + close); prints "us=... csw=..." (microseconds
#                             and this process's context switches, a file)
#   drive.py unlink DIR N     unlink them again; prints the same
#   drive.py run CMD ARG...   run CMD; prints "ms=... csw=..." (its context switches)
import os, resource, subprocess, sys, time

def csw(who):
    r = resource.getrusage(who)
    return r.ru_nvcsw + r.ru_nivcsw

def files(op, d, n):
    data = b"x" * 100
    names = [os.path.join(d, f"f{i:05d}") for i in range(n)]
    c0, t0 = csw(resource.RUSAGE_SELF), time.perf_counter()
    for p in names:
        if op == "create":
            fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            os.write(fd, data)
            os.close(fd)
        else:
            os.unlink(p)
    c1, t1 = csw(resource.RUSAGE_SELF), time.perf_counter()
    print(f"us={(t1 - t0) / n * 1e6:.1f} csw={(c1 - c0) / n:.2f}")

def run(cmd):
    c0, t0 = csw(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True)
    c1, t1 = csw(resource.RUSAGE_CHILDREN), time.perf_counter()
    print(f"ms={(t1 - t0) * 1e3:.1f} csw={c1 - c0}")

if len(sys.argv) == 4 and sys.argv[1] in ("create", "unlink"):
    files(sys.argv[1], sys.argv[2], int(sys.argv[3]))
elif len(sys.argv) >= 3 and sys.argv[1] == "run":
    run(sys.argv[2:])
else:
    sys.exit("usage: drive.py create|unlink DIR N | drive.py run CMD ARG...")
