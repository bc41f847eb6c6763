#!/usr/bin/env python3
"""Checks the rig tool's commands from the outside: rig devices --json lists the host
device with well-formed facts, and rig devices shows the GPUs of a fake PCI tree
(RIG_SYSFS_PCI) with their names, drivers, render nodes and why rig can or cannot open each;
rig bench --json prints figures with their floors, runs
benches on the device --device names, and runs the disk bench beside fio; rig demo verifies
its results; unknown benches, unknown devices and bad arguments are refused."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

# check_tool.py RIG [--disk] [--libcuda FAKE]: with --disk, rig is built with the disk device
# and has the disk bench; with --libcuda, rig has the CUDA driver and FAKE is the fake libcuda.
rig = sys.argv[1]
with_disk = "--disk" in sys.argv[2:]
fake_libcuda = sys.argv[sys.argv.index("--libcuda") + 1] if "--libcuda" in sys.argv[2:] else None
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



def fake_pci_tree(top):
    """A sysfs PCI tree as the kernel lays it out, with four GPUs and one function that is no
    GPU: an AMD Navi 31 bound to amdgpu with a render node (where the simulated gfx1100 of
    RIG_SIM=amd sits), its HD audio function, an NVIDIA H100 bound to nvidia (where the fake
    libcuda's CUDA:0 sits), one bound to vfio-pci, and an AMD Navi 21 with no driver."""
    root = os.path.join(top, "bus", "pci")
    functions = [("0000:03:00.0", 0x1002, 0x744c, 0x030000, "amdgpu", "renderD128"),
                 ("0000:03:00.1", 0x1002, 0xab30, 0x040300, "snd_hda_intel", None),
                 ("0000:1b:00.0", 0x10de, 0x2330, 0x030200, "nvidia", "renderD129"),
                 ("0000:41:00.0", 0x10de, 0x2331, 0x030200, "vfio-pci", None),
                 ("0000:c1:00.0", 0x1002, 0x73bf, 0x030000, None, None)]
    for address, vendor, device, pci_class, driver, render in functions:
        folder = os.path.join(root, "devices", address)
        os.makedirs(folder)
        for name, value in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"),
                            ("class", f"0x{pci_class:06x}")):
            with open(os.path.join(folder, name), "w") as f:
                f.write(value + "\n")
        if driver:
            os.makedirs(os.path.join(root, "drivers", driver), exist_ok=True)
            os.symlink(os.path.join("..", "..", "drivers", driver), os.path.join(folder, "driver"))
        if render:
            os.makedirs(os.path.join(folder, "drm", render))
    return root


with tempfile.TemporaryDirectory() as top:
    fake = {"RIG_SYSFS_PCI": fake_pci_tree(top)}
    text = run("devices", env=fake)
    check("devices on a fake PCI tree exits 0", text.returncode == 0, text.stderr)
    lines = text.stdout.splitlines()
    check("devices shows the opened devices, then the GPUs of the tree",
          lines[:1] and lines[0].startswith("CPU ") and f"GPUs on the PCI bus ({fake['RIG_SYSFS_PCI']}):" in lines,
          text.stdout)
    shown = [line.split()[0] for line in lines if line[:5] == "0000:"]
    check("devices shows each GPU of the tree, and not its audio function",
          shown == ["0000:03:00.0", "0000:1b:00.0", "0000:41:00.0", "0000:c1:00.0"], text.stdout)
    for part in ("0000:03:00.0  Advanced Micro Devices, Inc. [AMD/ATI] Navi 31",
                 "driver amdgpu  render node /dev/dri/renderD128", "NVIDIA Corporation GH100",
                 "driver nvidia  render node /dev/dri/renderD129",
                 "bound to vfio-pci: rig's VFIO path is not built yet",
                 "no kernel driver bound: rig's AMD driver needs amdgpu with KFD"):
        check(f"devices on the fake tree shows '{part}'", part in text.stdout, text.stdout)

    listed = run("devices", "--json", env=fake)
    try:
        opened = json.loads(listed.stdout or "null")
    except ValueError:
        opened = None
    check("devices --json on a fake PCI tree still gives the array of opened devices",
          isinstance(opened, list) and any(d.get("name") == "CPU" and d.get("pci") is None for d in opened),
          listed.stdout)

    both = run("devices", "--json", "--pci", env=fake)
    try:
        got = json.loads(both.stdout or "null")
    except ValueError:
        got = None
    check("devices --json --pci gives the opened devices and the tree's GPUs",
          isinstance(got, dict) and isinstance(got.get("devices"), list) and isinstance(got.get("pci"), dict),
          both.stdout)
    gpus = {g.get("address"): g for g in (got or {}).get("pci", {}).get("gpus", [])} if isinstance(got, dict) else {}
    check("devices --json --pci lists each GPU of the tree, and not its audio function",
          sorted(gpus) == ["0000:03:00.0", "0000:1b:00.0", "0000:41:00.0", "0000:c1:00.0"], both.stdout)
    amd, h100, vfio, unbound = (gpus.get(a, {}) for a in ("0000:03:00.0", "0000:1b:00.0", "0000:41:00.0",
                                                          "0000:c1:00.0"))
    check("the AMD GPU's names, IDs, class, driver and render node",
          amd.get("vendor") == "Advanced Micro Devices, Inc. [AMD/ATI]" and "Navi 31" in amd.get("device", "")
          and (amd.get("vendor_id"), amd.get("device_id"), amd.get("class_id")) == ("1002", "744c", "0300")
          and amd.get("class") == "VGA compatible controller" and amd.get("driver") == "amdgpu"
          and amd.get("render_node") == "/dev/dri/renderD128" and amd.get("why"), amd)
    check("the H100's names, driver and render node",
          h100.get("vendor") == "NVIDIA Corporation" and "H100" in h100.get("device", "")
          and h100.get("class") == "3D controller" and h100.get("driver") == "nvidia"
          and h100.get("render_node") == "/dev/dri/renderD129" and h100.get("why"), h100)
    check("the GPU bound to vfio-pci says rig's VFIO path is not built yet",
          vfio.get("driver") == "vfio-pci" and vfio.get("render_node") is None
          and vfio.get("why") == "bound to vfio-pci: rig's VFIO path is not built yet" and vfio.get("opened_as") == [],
          vfio)
    check("the GPU with no driver says so", unbound.get("driver") is None
          and unbound.get("why", "").startswith("no kernel driver bound"), unbound)
    check("devices --json --pci has no notes on a well-formed tree", got and got["pci"].get("notes") == [], both.stdout)

    # With RIG_SIM=amd, the simulated gfx1100 sits at the fake Navi 31's address.
    simulated = run("devices", "--json", "--pci", env=dict(fake, RIG_SIM="amd"))
    try:
        got = json.loads(simulated.stdout or "null")
    except ValueError:
        got = None
    if isinstance(got, dict) and any(d.get("name") == "AMD:0" for d in got.get("devices", [])):
        amd_dev = [d for d in got["devices"] if d.get("name") == "AMD:0"][0]
        gpus = {g.get("address"): g for g in got["pci"]["gpus"]}
        check("the GPU the simulated AMD:0 sits at is opened as AMD:0",
              gpus.get("0000:03:00.0", {}).get("why") == "opened as AMD:0"
              and gpus["0000:03:00.0"].get("opened_as") == ["AMD:0"], got["pci"])
        check("the opened AMD:0 carries its PCI function",
              (amd_dev.get("pci") or {}).get("address") == "0000:03:00.0", amd_dev)
        check("the simulated gfx1100's AMD:0 shows its compute: 4 compute units, 1 XCC, wave32",
              amd_dev.get("amd") == {"compute_units": 4, "xccs": 1, "wave_size": 32}, amd_dev)
        # With RIG_SIM=amd:mi300x, a simulated MI300X: gfx942 with 304 CUs on 8 XCCs.
        mi300x = run("devices", env={"RIG_SIM": "amd:mi300x", "RIG_SYSFS_PCI": "/nonexistent/bus/pci"})
        check("devices shows an MI300X's compute units and XCCs",
              mi300x.returncode == 0 and "AMD:0  arch gfx942" in mi300x.stdout
              and "compute: 304 compute units on 8 XCCs, wave64" in mi300x.stdout, mi300x.stdout + mi300x.stderr)
    else:
        print("skip devices with RIG_SIM=amd on a fake PCI tree: this rig is built without the AMD driver")

    # With the fake libcuda, CUDA:0 sits at the fake H100's address.
    if fake_libcuda:
        on_cuda = run("devices", "--json", "--pci", env=dict(fake, RIG_LIBCUDA=fake_libcuda))
        try:
            got = json.loads(on_cuda.stdout or "null")
        except ValueError:
            got = None
        gpus = {g.get("address"): g for g in got["pci"]["gpus"]} if isinstance(got, dict) else {}
        check("the GPU the fake libcuda's CUDA:0 sits at opens through libcuda",
              gpus.get("0000:1b:00.0", {}).get("why") == "CUDA:0 opens it through libcuda", on_cuda.stdout)
    else:
        print("skip devices with the fake libcuda on a fake PCI tree: this rig is built without the CUDA driver")

nobus = run("devices", env={"RIG_SYSFS_PCI": "/nonexistent/bus/pci"})
check("devices with no PCI bus says so in one line and exits 0",
      nobus.returncode == 0 and "no PCI bus here: /nonexistent/bus/pci/devices is absent" in nobus.stdout.splitlines(),
      nobus.stdout + nobus.stderr)

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
check("the benches are the ones built", bench_names == ["submit", "roundtrip", "grid", "batch", "load", "copy", "alloc", "ptx"]
      + (["disk"] if with_disk else []), bench_names)

ptx = run("bench", "ptx", "--json", "--repeats", "1")
check("bench ptx exits 0", ptx.returncode == 0, ptx.stderr)
figures = figures_of(ptx)
check("bench ptx prints the interpreter's rate and its grid time, each beside the host twin's",
      [f.get("name") for f in figures] == ["ptx-rate", "ptx-grid"]
      and all(f["value"] > 0 and f["floor"] > 0 for f in figures)
      and [f["unit"] for f in figures] == ["Minstr/s", "ms"], ptx.stdout)

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

# A device's name longer than the table's usual names' column (as remote devices' are): the
# figures still line up under their headings.
long_name = "MEM-WITH-A-NAME-LONGER-THAN-THE-COLUMN"
table = run("bench", "alloc", "--device", long_name, "--repeats", "1")
lines = table.stdout.splitlines()


def lined_up(header, row, name):
    """The row starts with the whole name, and its ratio ends where the heading "ratio" does."""
    end = header.find("ratio") + len("ratio")
    try:
        float(row[end - 8:end])
    except ValueError:
        return False
    return row.startswith(name + " ") and header.index("rig (median)") > len(name) and row[end:end + 2] == "  "


check("bench's table lines its figures up under their headings when a name is longer than the column",
      table.returncode == 0 and len(lines) == 2 and lined_up(lines[0], lines[1], f"alloc@{long_name}"),
      table.stdout + table.stderr)

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
