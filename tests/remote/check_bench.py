#!/usr/bin/env python3
"""The remote benches run end to end: `rig serve --devices CPU` on loopback, then `rig bench
roundtrip copy --device CPU@127.0.0.1 --json` against it, over tcp. Each figure must come out
with its floor (ucx_perftest, measured in the same run, over tcp as rig's messages are; the
copies' floor with its buffers in shared memory, as UCX allocates them by default, so that it
sends written memory as rig's copies do) and the ratio of the two; the figures
are printed for the log, never judged (the machine is shared: speed lives in the benches'
ratios, read by people). Skips (77) where ucx_perftest is missing (Debian's ucx-utils).

usage: check_bench.py RIG_TOOL"""
import json
import math
import os
import subprocess
import sys
import time

from processes import end_group

SKIP = 77
FIGURES = ["roundtrip@CPU@127.0.0.1", "copy-host-device@CPU@127.0.0.1", "copy-device-host@CPU@127.0.0.1",
           "copy-pinned-device@CPU@127.0.0.1", "copy-device-pinned@CPU@127.0.0.1"]


def main():
    tool = os.path.abspath(sys.argv[1])
    if not os.access("/usr/bin/ucx_perftest", os.X_OK):
        print("skip: no ucx_perftest (Debian's ucx-utils)")
        return SKIP
    env = dict(os.environ, RIG_TOKEN="bench-test-token", UCX_TLS="tcp")
    agent = subprocess.Popen([tool, "serve", "--devices", "CPU"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env, start_new_session=True)
    start = time.monotonic()
    try:
        line = agent.stdout.readline().strip()
        if not line.startswith("listening "):
            print(f"FAIL: rig serve printed {line!r}, not its address")
            return 1
        address = line.split()[1]
        bench = subprocess.run([tool, "bench", "roundtrip", "copy", "--device", "CPU@127.0.0.1", "--repeats", "1",
                                "--json"], env=dict(env, RIG_REMOTE=address), capture_output=True, text=True,
                               timeout=120)
        if bench.returncode != 0:
            print(bench.stdout, bench.stderr)
            print(f"FAIL: rig bench exited {bench.returncode}")
            return 1
        figures = {f["name"]: f for f in json.loads(bench.stdout)}
        failed = False
        for name in FIGURES:
            f = figures.get(name)
            if f is None:
                print(f"FAIL: no figure {name} among {sorted(figures)}")
                failed = True
                continue
            print(f"{name}: {f['value']:.4g} {f['unit']} beside {f['floor']:.4g} ({f['floor_name']}): "
                  f"ratio {f['ratio']:.2f}")
            if not (f["value"] > 0 and f["floor"] > 0 and "ucx_perftest" in f["floor_name"]):
                print(f"FAIL: {name} came out without its figure or its floor: {f}")
                failed = True
            elif not math.isclose(f["ratio"], f["value"] / f["floor"], rel_tol=1e-6):
                print(f"FAIL: {name}'s ratio {f['ratio']} is not its figure over its floor")
                failed = True
            elif " over tcp/" not in f["floor_name"] or " over sysv" in f["floor_name"]:
                print(f"FAIL: {name}'s floor does not say it went over tcp, as rig's messages do: {f['floor_name']}")
                failed = True
            elif name.startswith("copy-") and "UCX_TLS=tcp,sysv UCX_ALLOC_PRIO=md:sysv" not in f["floor_name"]:
                print(f"FAIL: {name}'s floor does not send from shared memory, as rig's copies do: {f['floor_name']}")
                failed = True
        if failed:
            return 1
        print(f"ok: the remote benches printed their figures beside their floors ({time.monotonic() - start:.1f} s)")
        return 0
    finally:
        end_group(agent)


if __name__ == "__main__":
    sys.exit(main())
