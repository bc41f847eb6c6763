#!/usr/bin/env python3
"""Checks `rig bench --compare` and scripts/hwtest.py from the outside:

- rig bench --compare marks a figure more than 10 % worse than the baseline's, which way
  its unit worsens: a time when higher, a rate (GB/s) when lower; and exits 1;
- it refuses a baseline it cannot read;

and, with the submit bench only:

- --update-baseline writes the baseline, and the run writes a JUnit XML and a JSON report;
- a baseline the figures are more than 10 % worse than makes the run fail, naming the
  figure in both reports; a baseline they beat passes;
- the conformance suite runs on the host device, or, where rig has no conform command yet,
  is reported as skipped with the reason and the run goes on (and fails under
  --require-conform);
- a run waits for the lock another run holds, and gives up after --lock-timeout;
- the HTML page, as headless Chromium renders it, shows each device's laws as a table with
  their statuses and each figure as a bar chart beside its floor and baseline.

- and, with RIG_SIM=amd (--amd-sim) and a fake libcuda (--libcuda PATH) where the build has
  them, a run of every law on every device `rig devices` shows passes on each.

usage: check_hwtest.py RIG HWTEST [--amd-sim] [--libcuda PATH]"""
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

rig, hwtest = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
amd_sim = "--amd-sim" in sys.argv[3:]
libcuda = sys.argv[sys.argv.index("--libcuda") + 1] if "--libcuda" in sys.argv[3:] else None
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402  (tests/support/checks.py)


def rendered(page):
    """The DOM headless Chromium builds from `page`, or None where it cannot (with why)."""
    browser = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
    if not browser:
        return None, "no chromium (Debian's chromium, which scripts/common.py installs)"
    done = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           "file://" + page], capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or "<html" not in done.stdout:
        return None, f"chromium exited {done.returncode}: {done.stderr[-800:]}"
    return done.stdout, ""


def bench(*args):
    return subprocess.run([rig, "bench", *args], capture_output=True, text=True, timeout=600)


with tempfile.TemporaryDirectory() as tmp:
    # rig bench --compare, on the copy bench (rates) and the submit bench (times, counts).
    measured = bench("copy", "submit", "--json", "--repeats", "1")
    check("rig bench --json exits 0", measured.returncode == 0, measured.stderr)
    figures = json.loads(measured.stdout or "[]")
    by_name = {f["name"]: f for f in figures}
    if {"copy-host-host", "copy-memory-host", "submit", "submit-allocations"} <= set(by_name):
        doctored = json.loads(measured.stdout)
        for f in doctored:
            if f["name"] == "copy-host-host":
                # Far beyond a loaded machine's spread between two runs (3x seen).
                f["value"] *= 20     # the baseline copied 20 times as fast: this run is worse
            elif f["name"] == "copy-memory-host":
                f["value"] /= 20     # it copied 20 times slower: this run is better
            elif f["name"] == "submit":
                f["value"] *= 100    # it submitted 100 times slower: better
        path = os.path.join(tmp, "doctored.json")
        with open(path, "w") as out:
            json.dump(doctored, out)
        compared = bench("copy", "submit", "--json", "--repeats", "1", "--compare", path)
        check("a regression makes rig bench --compare exit 1", compared.returncode == 1, compared.stderr)
        got = {f["name"]: f for f in json.loads(compared.stdout or "[]")}
        check("a rate lower than its baseline's is a regression", got.get("copy-host-host", {}).get("regression"),
              got.get("copy-host-host"))
        check("a rate higher than its baseline's is not", got.get("copy-memory-host", {}).get("regression") is False,
              got.get("copy-memory-host"))
        check("a time lower than its baseline's is not", got.get("submit", {}).get("regression") is False,
              got.get("submit"))
        check("no allocations against a baseline of none is not", got.get("submit-allocations", {}).get(
            "regression") is False, got.get("submit-allocations"))
        check("each compared figure keeps its fields and gains baseline, worse_by and regression",
              all({"name", "value", "min", "max", "unit", "floor", "floor_name", "ratio", "note", "baseline",
                   "worse_by", "regression"} <= set(f) for f in got.values()), list(got.values())[:1])
        check("the regression is named on stderr", "copy-host-host regressed" in compared.stderr, compared.stderr)
        for f in doctored:
            if f["name"] == "submit":
                f["value"] /= 10000  # now 100 times faster than this run: worse
        with open(path, "w") as out:
            json.dump(doctored, out)
        table = bench("submit", "--repeats", "1", "--compare", path)
        check("the table marks a time higher than its baseline's", table.returncode == 1 and any(
            line.startswith("submit ") and "REGRESSION" in line for line in table.stdout.splitlines()), table.stdout)
    else:
        check("rig bench copy submit prints the copy and submit figures", False, list(by_name))
    unreadable = bench("submit", "--compare", os.path.join(tmp, "doctored.json") + ".missing")
    check("a baseline that does not exist is refused", unreadable.returncode != 0, unreadable.stderr)
    with open(os.path.join(tmp, "broken.json"), "w") as out:
        out.write("{not json")
    broken = bench("submit", "--repeats", "1", "--compare", os.path.join(tmp, "broken.json"))
    check("a baseline that is not JSON is refused", broken.returncode == 2 and "not JSON" in broken.stderr,
          broken.stderr)

    lock = os.path.join(tmp, "hwtest.lock")
    baseline = os.path.join(tmp, "baselines", "this-machine.json")

    def run(*extra, out="out"):
        cmd = [sys.executable, hwtest, "--rig", rig, "--out", os.path.join(tmp, out), "--baseline", baseline,
               "--lock", lock, "--bench", "submit", "--repeats", "1", "--device", "CPU", *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
        report = None
        path = os.path.join(tmp, out, "hwtest.json")
        if os.path.exists(path):
            with open(path) as f:
                report = json.load(f)
        return done, report

    def junit(out="out"):
        return ET.parse(os.path.join(tmp, out, "hwtest.xml")).getroot()

    first, report = run("--update-baseline")
    conform_present = bool(report) and report["conform"] and report["conform"][0]["status"] != "unavailable"
    check("a first run writes the baseline", os.path.exists(baseline), first.stderr)
    check("the run writes a JSON report", report is not None, first.stderr)
    check("the run writes a JUnit XML", os.path.exists(os.path.join(tmp, "out", "hwtest.xml")))
    if report:
        check("the JSON report lists the devices", any(d.get("name") == "CPU" for d in report["devices"]),
              report["devices"])
        check("the JSON report holds the figures", {f["name"] for f in report["bench"]["figures"]} >=
              {"submit", "submit-allocations"}, report["bench"])
        entry = report["conform"][0] if report["conform"] else {}
        if conform_present:
            check("the conformance suite runs on the host device", entry.get("tests", 0) > 0, entry)
            check("and its laws hold there", entry.get("status") == "passed", entry)
            check("a run where every law holds exits 0", first.returncode == 0, first.stderr)
        else:
            check("a rig without conform is reported clearly", "no conform command" in first.stderr, first.stderr)
            check("and the run goes on to exit 0", first.returncode == 0, first.stderr)
            suites = [s.get("name") for s in junit()]
            check("and the JUnit XML has it as a skipped case", any("conform CPU" == s for s in suites) and
                  junit().get("skipped") == "1", suites)
            strict, _ = run("--require-conform", "--no-bench")
            check("--require-conform fails a rig without conform", strict.returncode == 1, strict.stderr)
    if os.path.exists(baseline):
        with open(baseline) as f:
            figures = json.load(f)
        check("the baseline keeps rig bench's JSON fields",
              all(set(f) == {"name", "value", "min", "max", "unit", "floor", "floor_name", "ratio", "note"}
                  for f in figures), figures[:1])

        # A baseline 100 times faster: the submit figure regressed.
        for f in figures:
            if f["name"] == "submit":
                f["value"] /= 100
        with open(baseline, "w") as out:
            json.dump(figures, out)
        worse, report = run("--no-conform", out="worse")
        check("a figure more than 10% worse than the baseline fails the run", worse.returncode == 1, worse.stderr)
        check("the JSON report names the regression", report and report["bench"]["regressions"] == ["submit"],
              report and report["bench"])
        cases = {c.get("name"): c for c in junit("worse").iter("testcase")}
        check("the JUnit XML fails the figure's case", "submit" in cases and cases["submit"].find("failure") is not None,
              list(cases))
        check("and passes the others", "submit-allocations" in cases and
              cases["submit-allocations"].find("failure") is None, list(cases))
        dom, why = rendered(os.path.join(tmp, "worse", "hwtest.html"))
        check("headless Chromium renders the HTML page", dom is not None, why)
        if dom:
            check("the page says the tests failed", re.search(r'id="verdict"[^>]*>tests failed<', dom), dom[:2000])
            charts = re.findall(r'<svg class="chart".*?</svg>', dom, re.S)
            check("each figure is a bar chart", len(charts) == len(report["bench"]["figures"]), len(charts))
            submit_chart = next((c for c in charts if 'aria-label="submit"' in c), "")
            check("the regressed figure's chart has its rig, floor and baseline bars",
                  all(f'data-of="{b}"' in submit_chart for b in ("rig", "floor", "baseline")), submit_chart)
            check("the regressed figure's status is Fail, coloured",
                  re.search(r"<td>submit</td><td class=\"status\" style=\"background:#c62828\">Fail</td>", dom),
                  dom[:3000])
        dom, why = rendered(os.path.join(tmp, "out", "hwtest.html"))
        if dom and conform_present:
            first_report = json.load(open(os.path.join(tmp, "out", "hwtest.json")))
            rows = re.findall(r'<table class="laws" data-device="CPU">(.*?)</table>', dom, re.S)
            laws = len(re.findall(r'<td class="status"', rows[0])) if rows else 0
            check("the page has a table of the CPU's laws, a row each", laws == len(first_report["cases"]) > 0,
                  (laws, len(first_report["cases"])))
            check("a run that passed says so", re.search(r'id="verdict"[^>]*>passed<', dom), dom[:2000])

        # A baseline 100 times slower: no regression.
        for f in figures:
            if f["name"] == "submit":
                f["value"] *= 10000
        with open(baseline, "w") as out:
            json.dump(figures, out)
        better, report = run("--no-conform", out="better")
        check("figures better than the baseline pass", better.returncode == 0 and report["ok"], better.stderr)

    # Every law on every device this rig finds: the host's, and the simulators' where built.
    env = dict(os.environ, **({"RIG_SIM": "amd"} if amd_sim else {}), **({"RIG_LIBCUDA": libcuda} if libcuda else {}))
    listed = subprocess.run([rig, "devices", "--json"], capture_output=True, text=True, env=env, timeout=120)
    names = [d["name"] for d in json.loads(listed.stdout or "[]")]
    everything = subprocess.run([sys.executable, hwtest, "--rig", rig, "--out", os.path.join(tmp, "all"), "--lock", lock,
                                 "--no-bench"], capture_output=True, text=True, env=env, timeout=900)
    check("a run of every law on every device rig finds exits 0", everything.returncode == 0,
          everything.stderr[-2000:])
    with open(os.path.join(tmp, "all", "hwtest.json")) as f:
        conform = {c["device"]: c for c in json.load(f)["conform"]}
    wanted = ["CPU"] + (["AMD:0"] if amd_sim else []) + (["CUDA:0"] if libcuda else [])
    check(f"... on {', '.join(names)}: the laws ran and held on each", set(wanted) <= set(names) and
          all(conform.get(n, {}).get("status") == "passed" and conform[n]["tests"] > 0 for n in names),
          {n: conform.get(n) for n in names})

    # Devices rig devices does not list, named: a memory device and the disk device.
    targets = subprocess.run([rig, "conform", "--list"], capture_output=True, text=True, timeout=120).stdout
    extra = ["MEM"] + (["DISK"] if "\nDISK\t" in "\n" + targets else [])  # DISK where the build has it
    named = subprocess.run([sys.executable, hwtest, "--rig", rig, "--out", os.path.join(tmp, "named"), "--lock", lock,
                            "--no-bench"] + [a for n in extra for a in ("--device", n)], capture_output=True,
                           text=True, timeout=900)
    with open(os.path.join(tmp, "named", "hwtest.json")) as f:
        conform = {c["device"]: c for c in json.load(f)["conform"]}
    check("a memory device and the disk device, named, run their laws, which hold", named.returncode == 0 and
          all(conform.get(n, {}).get("status") == "passed" and conform[n]["tests"] > 0 for n in extra),
          named.stderr[-1500:])
    nowhere = subprocess.run([sys.executable, hwtest, "--rig", rig, "--out", os.path.join(tmp, "nowhere"), "--lock",
                              lock, "--no-bench", "--device", "GPU:9"], capture_output=True, text=True, timeout=300)
    check("a device neither rig devices nor rig conform knows is an infrastructure error (exit 3)",
          nowhere.returncode == 3 and "no device is named GPU:9" in nowhere.stderr, nowhere.stderr[-1500:])

    # Another run holds the lock: this one waits, then gives up.
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        held.write("12345 another-run\n")
        held.flush()
        blocked, _ = run("--no-conform", "--no-bench", "--lock-timeout", "1", out="blocked")
        check("a run gives up on a lock another run holds", blocked.returncode == 2 and "lock" in blocked.stderr,
              blocked.stderr)
        check("and says who holds it", "12345 another-run" in blocked.stderr, blocked.stderr)

finish()
