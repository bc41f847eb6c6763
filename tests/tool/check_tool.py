#!/usr/bin/env python3
"""Checks the rig tool's commands from the outside: rig devices --json lists the host
device with well-formed facts; rig bench --json prints figures with their floors, runs
benches on the device --device names, and runs the disk bench beside fio; rig demo verifies
its results; unknown benches, unknown devices and bad arguments are refused."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

# check_tool.py RIG [--disk]: with --disk, rig is built with the disk device and has the disk bench.
rig = sys.argv[1]
with_disk = "--disk" in sys.argv[2:]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402  (tests/support/checks.py)


def run(*args, env=None):
    return subprocess.run([rig, *args], capture_output=True, text=True, timeout=600,
                          env=None if env is None else dict(os.environ, **env))


def figures_of(result):
    try:
        got = json.loads(result.stdout or "[]")
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def well_formed(f):
    """A figure has every field, a positive median between its min and max, and its ratio
    is its median over its floor's (0 where the floor is 0)."""
    if not {"name", "value", "min", "max", "unit", "floor", "floor_name", "ratio", "note"} <= set(f):
        return False
    ratio = f["value"] / f["floor"] if f["floor"] > 0 else 0
    return (f["value"] > 0 and f["min"] <= f["value"] <= f["max"] and f["floor"] >= 0
            and abs(f["ratio"] - ratio) <= 1e-9 * max(1, abs(ratio)))


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
check("an unknown bench is refused with status 2, naming it and the benches",
      unknown.returncode == 2 and "nosuch" in unknown.stderr and "batch" in unknown.stderr, unknown.stderr)
bench_names = unknown.stderr.partition("(there are ")[2].rstrip(")\n").split(", ")
check("the benches are the ones built", bench_names == ["submit", "roundtrip", "grid", "batch", "load", "copy", "alloc"]
      + (["disk"] if with_disk else []), bench_names)

batch = run("bench", "batch", "--json", "--repeats", "1")
check("bench batch exits 0", batch.returncode == 0, batch.stderr)
figures = figures_of(batch)
check("bench batch prints one figure, batch", [f.get("name") for f in figures] == ["batch"], batch.stdout)
for f in figures:
    check("the batch figure is well formed, in ns beside a floor", well_formed(f) and f["unit"] == "ns"
          and f["floor"] > 0 and "64" in f["note"], f)

load = run("bench", "load", "--json", "--repeats", "1")
check("bench load exits 0", load.returncode == 0, load.stderr)
figures = figures_of(load)
check("bench load prints one figure, load, beside dlopen of the same kernels",
      [f.get("name") for f in figures] == ["load"] and all(
          well_formed(f) and f["unit"] == "ns" and f["value"] > 0 and f["floor"] > 0 and "dlopen" in f["floor_name"]
          for f in figures), load.stdout)

alloc = run("bench", "alloc", "--device", "MEM-TOOL", "--json", "--repeats", "1")
check("bench alloc --device MEM-TOOL exits 0", alloc.returncode == 0, alloc.stderr)
figures = figures_of(alloc)
check("bench alloc --device MEM-TOOL measures allocations on MEM-TOOL",
      [f.get("name") for f in figures] == ["alloc@MEM-TOOL"] and all(well_formed(f) for f in figures), alloc.stdout)

on_cpu = run("bench", "submit", "--device", "CPU", "--json", "--repeats", "1")
figures = {f.get("name"): f for f in figures_of(on_cpu)}
check("bench submit --device CPU measures submit on the host device beside the null driver",
      on_cpu.returncode == 0 and "submit@CPU" in figures and well_formed(figures["submit@CPU"]),
      on_cpu.stdout + on_cpu.stderr)
check("a submit on the host device allocates nothing",
      figures.get("submit-allocations@CPU", {}).get("value") == 0, figures.get("submit-allocations@CPU"))

# With RIG_SIM=amd, a rig built with the AMD driver lists a simulated gfx1100 as AMD:0.
simulated = {"RIG_SIM": "amd"}
amd_devices = run("devices", "--json", env=simulated)
try:
    amd_listed = any(d.get("name") == "AMD:0" for d in json.loads(amd_devices.stdout or "[]"))
except ValueError:
    amd_listed = False
if amd_listed:
    on_amd = run("bench", "submit", "--device", "AMD:0", "--json", "--repeats", "1", env=simulated)
    figures = {f.get("name"): f for f in figures_of(on_amd)}
    submit_amd = figures.get("submit@AMD:0", {})
    check("bench submit --device AMD:0 measures submit on the simulated GPU beside the null driver",
          on_amd.returncode == 0 and well_formed(submit_amd) and submit_amd["floor"] > 0,
          on_amd.stdout + on_amd.stderr)
    if "carries no kernel" in on_amd.stderr:
        check("without its AMD kernel, bench submit --device AMD:0 says why and times a copy part",
              "clang-19" in on_amd.stderr and "copy part" in submit_amd.get("note", "")
              and "submit-driver@AMD:0" not in figures, on_amd.stdout + on_amd.stderr)
    else:
        driver = figures.get("submit-driver@AMD:0", {})
        check("bench submit --device AMD:0 launches the empty kernel",
              "launch part" in submit_amd.get("note", ""), submit_amd)
        check("bench submit --device AMD:0 times the driver's part of a launch beside memcpy of its ring dwords",
              well_formed(driver) and driver["unit"] == "ns" and driver["floor"] > 0
              and driver["floor_name"].startswith("memcpy") and "room + submit" in driver["note"], driver)
else:
    print("skip bench submit --device AMD:0: this rig is built without the AMD driver")

nodevice = run("bench", "alloc", "--device", "NOSUCH:7")
check("an unknown device is refused with status 2, naming it and the devices there are",
      nodevice.returncode == 2 and "NOSUCH:7" in nodevice.stderr and "CPU" in nodevice.stderr
      and not nodevice.stdout, nodevice.stderr)
refused = run("bench", "roundtrip", "--device", "MEM-TOOL")
check("a bench that cannot run on the device is refused with status 2, saying why",
      refused.returncode == 2 and "roundtrip cannot run on MEM-TOOL" in refused.stderr
      and "no launches" in refused.stderr, refused.stderr)

if with_disk:
    with tempfile.TemporaryDirectory() as tmp:
        small = {"RIG_BENCH_DISK_BYTES": "16M", "TMPDIR": tmp}
        disk = run("bench", "disk", "--json", "--repeats", "1", env=small)
        check("bench disk with 16 MiB exits 0", disk.returncode == 0, disk.stderr)
        figures = {f.get("name"): f for f in figures_of(disk)}
        check("bench disk reads cold and warm and writes",
              set(figures) == {"disk-read-cold", "disk-read-warm", "disk-write"}, disk.stdout)
        check("bench disk's figures are in GB/s of a 16 MiB file", all(
            well_formed(f) and f["unit"] == "GB/s" and "16 MiB" in f["note"] for f in figures.values()), disk.stdout)
        if shutil.which("fio"):
            check("bench disk measures fio beside each figure", all(
                f["floor"] > 0 and f["floor_name"].startswith("fio ") for f in figures.values()), disk.stdout)
        else:
            print("skip bench disk beside fio: fio is not installed")
        # Without fio, the floors say so and rig's figures remain.
        nofio = run("bench", "disk", "--json", "--repeats", "1", env=dict(small, PATH=tmp))
        figures = figures_of(nofio)
        check("without fio, bench disk gives rig's figures and says fio is not installed",
              nofio.returncode == 0 and len(figures) == 3 and all(
                  f["value"] > 0 and f["floor"] == 0 and "fio is not installed" in f["floor_name"]
                  for f in figures), nofio.stdout + nofio.stderr)
        check("bench disk leaves no file behind", os.listdir(tmp) == [], os.listdir(tmp))
        odd = run("bench", "disk", env={"RIG_BENCH_DISK_BYTES": "1000"})
        check("a disk size that is no whole number of MiB is refused with status 2",
              odd.returncode == 2 and "RIG_BENCH_DISK_BYTES=1000" in odd.stderr, odd.stderr)
else:
    print("skip bench disk: this rig is built without the disk device")
bad = run("demo", "--groups", "0")
check("a bad argument is refused", bad.returncode != 0, bad.stdout)

demo = run("demo")
check("demo verifies its results", demo.returncode == 0 and "all results verified" in demo.stdout,
      demo.stdout + demo.stderr)
check("demo prints a row per submission", sum(1 for line in demo.stdout.splitlines()
                                               if line.strip()[:1].isdigit()) == 4, demo.stdout)

finish()
