#!/usr/bin/env python3
"""A scripted stand-in for the rig tool, for the tests of scripts/hwtest.py: it answers
`rig --help`, `rig devices --json`, `rig conform [--list] [--law NAME]...` and `rig bench`
as the scenario in $SCRIPTED_RIG (a JSON file) says, and appends each command it runs to
the file $SCRIPTED_RIG.calls.

The scenario:
  devices   the array `rig devices --json` prints, or "garbage", or "fail"
  laws      the law names, the same on every device
  outcomes  {"DEVICE": {"LAW": OUTCOME}}, "*" for any device; a law not named passes. OUTCOME:
            "pass"; "fail"; "skip"; "crash" (dies by SIGSEGV); "sleep" (never ends); "hang"
            (the device is lost with "no progress for 2000 ms" and stays lost); "lose" (lost
            by a page fault, and stays lost); "garbage" (no JUnit); "flaky:N" (fails its first
            N runs); "slow" (passes after 0.3 s)
  benches   {"NAME": [VALUE, ...]}: a figure NAME in ns per run, one value per run of it (the
            last repeats); or "crash" / "sleep" / "garbage"
Lost devices are kept in $SCRIPTED_RIG.lost; every law on one fails with its loss."""
import json
import os
import signal
import sys
import time

scenario_path = os.environ["SCRIPTED_RIG"]
with open(scenario_path) as f:
    scenario = json.load(f)
argv = sys.argv[1:]
with open(scenario_path + ".calls", "a") as f:
    f.write(json.dumps(argv) + "\n")


def count(key):
    """How many times this key was counted before, counting this time."""
    path = scenario_path + ".counts"
    counts = {}
    if os.path.exists(path):
        with open(path) as f:
            counts = json.load(f)
    counts[key] = counts.get(key, 0) + 1
    with open(path, "w") as f:
        json.dump(counts, f)
    return counts[key] - 1


def lost():
    try:
        with open(scenario_path + ".lost") as f:
            return set(f.read().split("\n")) - {""}
    except FileNotFoundError:
        return set()


def lose(device):
    with open(scenario_path + ".lost", "a") as f:
        f.write(device + "\n")


def option(name, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def options(name):
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def xml(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")


if not argv or argv[0] == "--help":
    print("rig: scripted\nUsage: rig [OPTIONS] SUBCOMMAND\n\nSubcommands:\n  devices  the devices\n"
          "  bench    benches\n  conform  the laws")
    sys.exit(0)

command = argv[0]
if command == "devices":
    devices = scenario.get("devices", [])
    if devices == "garbage":
        print("<<< not json")
        sys.exit(0)
    if devices == "fail":
        print("rig: cannot scan the PCI bus", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(devices))
    sys.exit(0)

if command == "conform":
    if "--help" in argv:
        print("Options:\n  --device\n  --junit\n  --law\n  --law-timeout\n  --list")
        sys.exit(0)
    names = [d["name"] for d in scenario["devices"]]
    device = option("--device")
    chosen = [device] if device else names
    laws = options("--law") or scenario["laws"]
    if "--list" in argv:
        for d in chosen:
            for law in scenario["laws"]:
                print(f"{d}\t{law}")
        sys.exit(0)
    cases = []
    for d in chosen:
        for law in laws:
            outcome = scenario.get("outcomes", {}).get(d, {}).get(law) or \
                scenario.get("outcomes", {}).get("*", {}).get(law, "pass")
            print(f"  {law}  ...", flush=True)
            if d in lost():
                cases.append((d, law, "failure", f"{d} lost: it was lost before (a page fault at 0x1000)"))
                continue
            if outcome.startswith("flaky:"):
                outcome = "fail" if count(f"{d}\n{law}") < int(outcome.split(":")[1]) else "pass"
            if outcome == "pass":
                cases.append((d, law, None, ""))
            elif outcome == "slow":
                time.sleep(0.3)
                cases.append((d, law, None, ""))
            elif outcome == "fail":
                cases.append((d, law, "failure", "the value read back was 7, not 8"))
            elif outcome == "skip":
                cases.append((d, law, "skipped", "its facts give no hang_ms"))
            elif outcome == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            elif outcome == "sleep":
                time.sleep(3600)
            elif outcome == "hang":
                lose(d)
                cases.append((d, law, "failure", f"{d} lost: no progress for 2000 ms"))
            elif outcome == "lose":
                lose(d)
                cases.append((d, law, "failure", f"{d} lost: page fault at 0x7f12_3400_0000 (write)"))
            elif outcome == "garbage":
                print("\x00\x01 garbage, and no JUnit")
                sys.exit(0)
    junit = option("--junit")
    if junit:
        with open(junit, "w") as f:
            f.write("<testsuites>")
            for d in dict.fromkeys(c[0] for c in cases):
                f.write(f'<testsuite name="{xml(d)}">')
                for _, law, kind, message in (c for c in cases if c[0] == d):
                    f.write(f'<testcase name="{xml(law)}" classname="{xml(d)}">')
                    if kind:
                        f.write(f'<{kind} message="{xml(message)}"/>')
                    f.write("</testcase>")
                f.write("</testsuite>")
            f.write("</testsuites>")
    sys.exit(1 if any(c[2] == "failure" for c in cases) else 0)

if command == "bench":
    benches = scenario.get("benches", {})
    if "--help" in argv:
        print(f"Positionals:\n  names TEXT ...  benches to run: {', '.join(benches)} (default: all)")
        sys.exit(0)
    name = argv[1]
    plan = benches[name]
    if plan == "crash":
        os.kill(os.getpid(), signal.SIGABRT)
    if plan == "sleep":
        time.sleep(3600)
    if plan == "garbage":
        print("figures? no")
        sys.exit(0)
    value = plan[min(count("bench " + name), len(plan) - 1)]
    figure = {"name": name, "value": value, "min": value, "max": value, "unit": "ns", "floor": 1,
              "floor_name": "nothing", "ratio": value, "note": "scripted"}
    baseline_path = option("--compare")
    if baseline_path:
        with open(baseline_path) as f:
            baseline = {b["name"]: b for b in json.load(f)}
        if name in baseline:
            old = baseline[name]["value"]
            figure.update(baseline=old, worse_by=value / old - 1, regression=value > old * 1.1)
        else:
            figure.update(baseline=None, worse_by=None, regression=False)
    print(json.dumps([figure]))
    sys.exit(1 if figure.get("regression") else 0)

print(f"rig: no command {command}", file=sys.stderr)
sys.exit(109)
