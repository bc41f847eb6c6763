#!/usr/bin/env python3
"""Two agents started by Open MPI's mpirun on this machine, as a cluster's launcher starts
one per node: each rank runs rig serve and prints the address it listens on; a client then
runs a conformance law on each agent's memory device, and mpirun's SIGTERM ends both. Skips
(77) where mpirun is missing (Debian's openmpi-bin).

usage: check_mpirun.py RIG_TOOL"""
import os
import re
import shutil
import subprocess
import sys
import time

from processes import end_group

SKIP = 77


def main():
    tool = os.path.abspath(sys.argv[1])
    if not shutil.which("mpirun"):
        print("skip: no mpirun (Debian's openmpi-bin)")
        return SKIP
    env = dict(os.environ, RIG_TOKEN="mpirun-test-token", OMPI_MCA_plm="isolated", OMPI_MCA_btl="self",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    mpirun = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", "--tag-output", "-x", "RIG_TOKEN", tool,
                               "serve", "--devices", "MEM"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env, start_new_session=True)
    start = time.monotonic()
    try:
        addresses = {}
        while len(addresses) < 2:
            line = mpirun.stdout.readline()
            if not line:
                print(f"FAIL: mpirun ended before both ranks listened ({addresses})")
                return 1
            m = re.match(r"\[\d+,(\d+)\]<stdout>:\s*listening (\S+)", line.strip())
            if m:
                addresses[m.group(1)] = m.group(2)
            else:
                print(line.rstrip())
        print(f"the ranks listen on {addresses} ({time.monotonic() - start:.1f} s)")
        for rank, address in sorted(addresses.items()):
            client = subprocess.run([tool, "conform", "--device", "MEM@127.0.0.1", "--law",
                                     "a reader sees the last writer"], env=dict(env, RIG_REMOTE=address),
                                    capture_output=True, text=True, timeout=60)
            if client.returncode != 0 or "1 passed, 0 failed" not in client.stdout:
                print(client.stdout, client.stderr)
                print(f"FAIL: the law did not pass on rank {rank}'s agent at {address}")
                return 1
        print(f"ok: both agents mpirun started served their memory device ({time.monotonic() - start:.1f} s)")
        return 0
    finally:
        end_group(mpirun)


if __name__ == "__main__":
    sys.exit(main())
