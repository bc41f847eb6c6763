#!/usr/bin/env python3
"""Checks the rig tool on rig's NVIDIA driver from the outside, against the NVIDIA simulator:

- with RIG_SIM=nv, rig devices lists NV:0 with its arch, video memory, bus and the kernel
  driver's version (as text and as JSON);
- rig bench copy --device NV:0 gives both copy figures beside memcpy floors;
- rig bench roundtrip and batch --device NV:0 launch the empty kernel beside a floor; load,
  which loads the host's ELF object, is refused with status 2;
- rig prof on a program that copies on NV:0 (nv_prof_program) sums up NV:0's 10 values with
  the times the device gave them.

usage: check_nv_tool.py RIG NV_PROF_PROGRAM"""
import json
import os
import subprocess
import sys
import tempfile

rig, program = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402  (tests/support/checks.py)


def run(*args, sim="nv", cwd=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_PROFILE")}
    env["RIG_SIM"] = sim
    return subprocess.run([rig, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def figures_of(result):
    try:
        return {f["name"]: f for f in json.loads(result.stdout)}
    except (ValueError, KeyError, TypeError):
        return {}


listed = run("devices", "--json")
try:
    nv = [d for d in json.loads(listed.stdout) if d.get("name") == "NV:0"]
except ValueError:
    nv = []
check("devices --json with RIG_SIM=nv lists NV:0", listed.returncode == 0 and len(nv) == 1, listed.stdout + listed.stderr)
if nv:
    facts = nv[0]
    check("NV:0's facts give its arch, bus, video memory and the kernel driver's version",
          facts.get("arch") == "sm_90" and facts.get("bus") == "0000:41:00.0"
          and (facts.get("nv") or {}).get("driver_version") == "580.142"
          and (facts.get("nv") or {}).get("video_memory") == facts.get("budget") > 0, facts)
    nv_facts = facts.get("nv") or {}
    check("NV:0's facts give its SMs and shared memory, a block's below an SM's",
          nv_facts.get("sms", 0) > 0 and 0 < nv_facts.get("shared_per_block", 0) < nv_facts.get("shared_per_sm", 0),
          facts)
text = run("devices")
check("devices prints NV:0 with the kernel driver's version and its bus",
      "NV:0  arch sm_90" in text.stdout and "kernel driver 580.142, bus 0000:41:00.0" in text.stdout, text.stdout)
if nv:
    check("devices prints NV:0's SM count", f"compute: {nv_facts.get('sms')} SMs" in text.stdout, text.stdout)
ampere = run("devices", "--json", sim="nv:ampere")
check("with RIG_SIM=nv:ampere, NV:0 is sm_80", any(d.get("name") == "NV:0" and d.get("arch") == "sm_80"
                                                  for d in json.loads(ampere.stdout or "[]")), ampere.stdout)

copy = run("bench", "copy", "--device", "NV:0", "--json", "--repeats", "1")
figures = figures_of(copy)
check("bench copy --device NV:0 gives both directions beside memcpy of the same bytes",
      copy.returncode == 0 and set(figures) == {"copy-host-device@NV:0", "copy-device-host@NV:0"}
      and all(f["value"] > 0 and f["floor"] > 0 and f["floor_name"].startswith("memcpy") for f in figures.values()),
      copy.stdout + copy.stderr)

for bench in ("roundtrip", "batch"):
    result = run("bench", bench, "--device", "NV:0", "--json", "--repeats", "1")
    figure = figures_of(result).get(f"{bench}@NV:0", {})
    check(f"bench {bench} --device NV:0 launches the empty kernel on NV:0, beside a floor of the same run",
          result.returncode == 0 and figure.get("value", 0) > 0 and figure.get("floor", 0) > 0
          and "empty" in figure.get("note", "") and "NV:0" in figure.get("note", ""), result.stdout + result.stderr)
load = run("bench", "load", "--device", "NV:0")
check("bench load --device NV:0 is refused with status 2: it loads the host's ELF object",
      load.returncode == 2 and "load cannot run on NV:0" in load.stderr, load.stderr)

with tempfile.TemporaryDirectory() as tmp:
    trace_path = os.path.join(tmp, "trace.json")
    prof = run("prof", "-o", trace_path, "--", program, cwd=tmp)
    check("rig prof runs the program on NV:0 and exits 0", prof.returncode == 0, prof.stdout + prof.stderr)
    rows = [line.split() for line in prof.stdout.splitlines() if line.startswith("NV:0 ")]
    check("the summary has NV:0's 10 values with their time", len(rows) == 1 and rows[0][1] == "10"
          and not rows[0][2].startswith("0 "), prof.stdout)
    if os.path.exists(trace_path):
        with open(trace_path) as f:
            events = json.load(f).get("traceEvents", [])
        names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
        values = [e for e in events if e.get("cat") == "value" and names.get(e.get("pid")) == "NV:0"]
        check("the trace has NV:0's 10 values, each with a duration the device measured",
              len(values) == 10 and all(e.get("dur", 0) > 0 for e in values), values[:3])
        starts = sorted(e["ts"] for e in values)
        ends = sorted(e["ts"] + e["dur"] for e in values)
        check("NV:0's values do not overlap (device order)",
              all(starts[i + 1] >= ends[i] - 1e-3 for i in range(len(values) - 1)), values[:3])

finish()
