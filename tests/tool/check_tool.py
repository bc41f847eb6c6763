#!/usr/bin/env python3
"""Checks the rig tool's commands from the outside: rig devices --json lists the host
device with well-formed facts; rig bench --json prints figures with their floors;
rig demo verifies its results; unknown benches and bad arguments are refused."""
import json
import subprocess
import sys

rig = sys.argv[1]
failures = []


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + (f": {detail}" if detail and not condition else ""))
    if not condition:
        failures.append(name)


def run(*args):
    return subprocess.run([rig, *args], capture_output=True, text=True, timeout=600)


devices = run("devices", "--json")
check("devices exits 0", devices.returncode == 0, devices.stderr)
listed = json.loads(devices.stdout or "[]")
cpu = [d for d in listed if d.get("name") == "CPU"]
check("devices lists CPU", len(cpu) == 1, devices.stdout)
if cpu:
    facts = cpu[0]
    check("CPU has queues", len(facts["queues"]) >= 1)
    check("CPU's alignment is a power of two", facts["alignment"] & (facts["alignment"] - 1) == 0)
    check("CPU's completion is Host", facts["completion"] == "Host")

bench = run("bench", "submit", "--json", "--repeats", "1")
check("bench submit exits 0", bench.returncode == 0, bench.stderr)
figures = json.loads(bench.stdout or "[]")
names = {f["name"] for f in figures}
check("bench submit prints its figure and its allocations", {"submit", "submit-allocations"} <= names, names)
for f in figures:
    check(f"figure {f['name']} has every field",
          {"name", "value", "unit", "floor", "floor_name", "ratio"} <= set(f), f)
allocations = [f for f in figures if f["name"] == "submit-allocations"]
check("a submit allocates nothing", allocations and allocations[0]["value"] == 0, allocations)

unknown = run("bench", "nosuch")
check("an unknown bench is refused", unknown.returncode != 0 and "nosuch" in unknown.stderr, unknown.stderr)
bad = run("demo", "--groups", "0")
check("a bad argument is refused", bad.returncode != 0, bad.stdout)

demo = run("demo")
check("demo verifies its results", demo.returncode == 0 and "all results verified" in demo.stdout,
      demo.stdout + demo.stderr)
check("demo prints a row per submission", sum(1 for line in demo.stdout.splitlines()
                                               if line.strip()[:1].isdigit()) == 4, demo.stdout)

sys.exit(1 if failures else 0)
