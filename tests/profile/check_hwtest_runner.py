#!/usr/bin/env python3
"""Checks scripts/hwtest.py against a scripted rig (scripted_rig.py) that passes, fails,
crashes, hangs, loses a device, flakes, prints garbage or shows no device:

- each status and the exit code it gives (0 ok, 1 a test failure, 2 usage, 3 infrastructure);
- the devices checked against the host's expectation, with their driver and firmware versions;
- the known failures, flakes and skips files; a failed law rerun; a regressed figure re-measured;
- a hang quarantines the device (no benches), keeps the kernel's log, marks the host unhealthy
  and later runs are refused until --health-check passes;
- after kill -9 the results up to the last law are on disk, and --resume finishes the run
  without redoing them; --deadline stops a run cleanly;
- --shard covers every law exactly once; --law and --fraction choose subsets.

usage: check_hwtest_runner.py HWTEST SCRIPTED_RIG"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

hwtest, scripted = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402  (tests/support/checks.py)

LAWS = [f"law {n}" for n in ("one", "two", "three", "four", "five", "six")]
DEVICES = [{"name": "GPU:0", "arch": "gfx1100", "pci": {"address": "0000:03:00.0", "driver": "amdgpu"}},
           {"name": "GPU:1", "arch": "sm_90", "pci": {"address": "0000:41:00.0", "driver": "nvidia"}}]
HEALTH = "facts are well formed"  # a law of the runner's health check
LAW_TIMEOUT = "2"  # health checks run with 10: the calls tell them apart

tmp_holder = tempfile.TemporaryDirectory()
tmp = tmp_holder.name


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(content if isinstance(content, str) else json.dumps(content))


# A sysfs and procfs with the drivers' and firmware's versions.
sysroot = os.path.join(tmp, "root")
os.makedirs(os.path.join(sysroot, "sys", "module", "amdgpu"))
write(os.path.join(sysroot, "sys", "bus", "pci", "devices", "0000:03:00.0", "vbios_version"), "113-D1\n")
write(os.path.join(sysroot, "proc", "driver", "nvidia", "version"),
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n")
write(os.path.join(sysroot, "proc", "driver", "nvidia", "gpus", "0000:41:00.0", "information"),
      "Model: H100\nVideo BIOS: 96.00.99.00.01\n")
dmesg_ok = os.path.join(tmp, "dmesg.sh")
write(dmesg_ok, "#!/bin/sh\necho '[    0.100000] long before the run'\n"
                "echo '[99999999.000000] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!'\n")
os.chmod(dmesg_ok, 0o755)
dmesg_denied = os.path.join(tmp, "dmesg-denied.sh")
write(dmesg_denied, "#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\nexit 1\n")
os.chmod(dmesg_denied, 0o755)


class Case:
    """One scenario's folder: the scripted rig's scenario, the lists, the lock and the results."""
    count = 0

    def __init__(self, devices=DEVICES, laws=LAWS, outcomes=None, benches=None):
        Case.count += 1
        self.dir = os.path.join(tmp, f"case{Case.count}")
        os.makedirs(self.dir)
        self.scenario = os.path.join(self.dir, "scenario.json")
        write(self.scenario, {"devices": devices, "laws": [HEALTH, *laws], "outcomes": outcomes or {},
                              "benches": benches or {"submit": [100]}})
        self.lock = os.path.join(self.dir, "hwtest.lock")
        self.out = os.path.join(self.dir, "out")
        self.files = {k: os.path.join(self.dir, f"host.{k}.json") for k in ("expect", "fails", "flakes", "skips")}
        self.baseline = os.path.join(self.dir, "host.json")

    def command(self, *extra, dmesg=dmesg_ok):
        return [sys.executable, hwtest, "--rig", scripted, "--out", self.out, "--lock", self.lock,
                "--baseline", self.baseline, "--law-timeout", LAW_TIMEOUT, "--dmesg", dmesg,
                *[a for k, path in self.files.items() for a in (f"--{k}", path)], *extra]

    def env(self):
        return dict(os.environ, SCRIPTED_RIG=self.scenario, RIG_HWTEST_SYSROOT=sysroot)

    def run(self, *extra, dmesg=dmesg_ok):
        done = subprocess.run(self.command(*extra, dmesg=dmesg), capture_output=True, text=True, timeout=120,
                              env=self.env())
        return done, self.report()

    def report(self):
        path = os.path.join(self.out, "hwtest.json")
        if not os.path.exists(path):
            return {}
        with open(path) as f:
            return json.load(f)

    def records(self):
        with open(os.path.join(self.out, "results.jsonl")) as f:
            return [json.loads(line) for line in f]

    def statuses(self, report=None):
        return {(c["device"], c["law"]): c["status"] for c in (report or self.report()).get("cases", [])}

    def law_calls(self):
        """The (device, law) of each rig conform that ran one law for the run, not for health."""
        calls = []
        path = self.scenario + ".calls"
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    a = json.loads(line)
                    if a[:1] == ["conform"] and "--law" in a and a[a.index("--law-timeout") + 1] == LAW_TIMEOUT:
                        calls.append((a[a.index("--device") + 1], a[a.index("--law") + 1]))
        return calls

    def junit_cases(self):
        root = ET.parse(os.path.join(self.out, "hwtest.xml")).getroot()
        return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


everything = {(d["name"], law) for d in DEVICES for law in [HEALTH, *LAWS]}

# --- Every law passes; the report tells where and what ran. ---------------------------------
ok = Case()
write(ok.files["expect"], {"devices": [
    {"name": "GPU:0", "arch": "gfx1100", "driver": "amdgpu", "firmware": "113-D1", "pci": "0000:03:00.0"},
    {"name": "GPU:1", "arch": "sm_90", "driver": "nvidia", "driver_version": "550.54.14",
     "firmware": "96.00.99.00.01"}]})
done, report = ok.run()
check("a run where every law passes exits 0", done.returncode == 0, done.stderr)
check("each law on each device is a Pass", ok.statuses(report) == {c: "Pass" for c in everything},
      ok.statuses(report))
check("each law runs in a rig conform of its own", sorted(ok.law_calls()) == sorted(everything), ok.law_calls())
check("the JUnit XML has a case per law and per figure", len(ok.junit_cases()) == len(everything) + 1,
      list(ok.junit_cases()))
versions = {d["name"]: d["versions"] for d in report.get("devices", [])}
check("the report has the driver's version from procfs and the firmware's from sysfs",
      versions.get("GPU:1", {}).get("driver_version") == "550.54.14" and
      versions.get("GPU:0", {}).get("firmware") == "113-D1" and
      versions.get("GPU:1", {}).get("firmware") == "96.00.99.00.01", versions)
check("an in-tree driver's version is the kernel's",
      versions.get("GPU:0", {}).get("driver_version") == f"in-tree ({os.uname().release})", versions)
check("the report has the kernel, the build, the host and the lock's holder",
      report.get("kernel", {}).get("release") == os.uname().release and "commit" in report.get("build", {}) and
      report.get("host") and str(os.getpid()) not in (report.get("lock", {}).get("holder") or "x") and
      "@" in (report.get("lock", {}).get("holder") or ""), {k: report.get(k) for k in ("kernel", "build", "lock")})
with open(ok.scenario + ".calls") as f:
    first_conform = next(json.loads(l) for l in f if json.loads(l)[:1] == ["conform"] and "--law" in l)
check("the health check runs before the first law", first_conform[first_conform.index("--law-timeout") + 1] == "10",
      first_conform)

# --- The expectation. ---------------------------------------------------------------------
write(ok.files["expect"], {"devices": [{"name": "GPU:0", "arch": "gfx1100", "firmware": "113-D2"}]})
done, report = ok.run()
check("a firmware other than the expectation's is an infrastructure error (exit 3)", done.returncode == 3,
      done.stderr)
check("and the error names the device, the field and both values",
      any("GPU:0: firmware is 113-D1, the expectation says 113-D2" in e for e in report.get("errors", [])),
      report.get("errors"))
check("and no law ran", report.get("cases") == [], report.get("cases"))
write(ok.files["expect"], {"devices": [{"name": "GPU:0"}, {"name": "GPU:2", "arch": "gfx942"}]})
done, report = ok.run()
check("a device the expectation names that is missing is an infrastructure error", done.returncode == 3 and
      any("GPU:2 is missing" in e for e in report.get("errors", [])), report.get("errors"))
write(ok.files["expect"], {"devices": [{"name": "GPU:0"}], "only": True})
done, report = ok.run()
check("with only, a device the expectation does not name is an error", done.returncode == 3 and
      any("not in the expectation: GPU:1" in e for e in report.get("errors", [])), report.get("errors"))
write(ok.files["expect"], "{broken")
done, report = ok.run()
check("an unreadable expectation is an infrastructure error, not a pass", done.returncode == 3, done.stderr)

vanished = Case(devices=[])
write(vanished.files["expect"], {"devices": [{"name": "GPU:0", "arch": "gfx1100"}]})
done, report = vanished.run()
check("GPUs that vanished are an infrastructure error, never a pass", done.returncode == 3 and
      any("GPU:0 is missing" in e and "no device" in e for e in report.get("errors", [])), report.get("errors"))
os.remove(vanished.files["expect"])
done, report = vanished.run()
check("no device at all is an infrastructure error without an expectation too", done.returncode == 3 and
      any("no device" in e for e in report.get("errors", [])), report.get("errors"))
garbled = Case(devices="garbage")
done, report = garbled.run()
check("rig devices printing garbage is an infrastructure error", done.returncode == 3 and
      any("printed no devices" in e for e in report.get("errors", [])), report.get("errors"))
check("and the JUnit XML has it as an error case", any(c.find("error") is not None
                                                        for c in garbled.junit_cases().values()))

# --- Each status. ---------------------------------------------------------------------------
mixed = Case(outcomes={
    "GPU:0": {"law one": "fail", "law two": "crash", "law three": "sleep", "law four": "skip",
              "law five": "flaky:1"},
    "GPU:1": {"law one": "fail", "law three": "fail", "law five": "garbage"}},
    benches={"submit": [100], "grid": [200, 100], "load": [300], "copy": "crash"})
write(mixed.files["fails"], [{"device": "GPU:1", "law": "law one", "reason": "a known bug",
                              "issue": "https://example.org/rig/issues/7"},
                             {"device": "GPU:1", "law": "law two", "reason": "fixed meanwhile"}])
write(mixed.files["flakes"], [{"device": "GPU:*", "law": "law thr*", "reason": "one in a hundred"}])
write(mixed.files["skips"], [{"device": "GPU:1", "law": "law four", "reason": "takes an hour here"}])
write(mixed.baseline, [{"name": n, "value": 100, "unit": "ns"} for n in ("submit", "grid", "load")])
started = time.monotonic()
done, report = mixed.run()
statuses = mixed.statuses(report)
check("a law that fails twice is a Fail", statuses.get(("GPU:0", "law one")) == "Fail", statuses)
check("a rig that dies by a signal is a Crash", statuses.get(("GPU:0", "law two")) == "Crash", statuses)
check("a known flake that fails is a KnownFlake, even a timeout",
      statuses.get(("GPU:0", "law three")) == "KnownFlake", statuses)
check("a skip is a Skip with the capability missing", statuses.get(("GPU:0", "law four")) == "Skip" and
      "hang_ms" in next(c["message"] for c in report["cases"] if c["law"] == "law four"), statuses)
check("a fail then a pass is a Flake", statuses.get(("GPU:0", "law five")) == "Flake", statuses)
check("a known failure that fails is an ExpectedFail", statuses.get(("GPU:1", "law one")) == "ExpectedFail",
      statuses)
check("a known failure that passes is an UnexpectedPass", statuses.get(("GPU:1", "law two")) == "UnexpectedPass",
      statuses)
check("a law in the skips file is a Skip, not run", statuses.get(("GPU:1", "law four")) == "Skip" and
      ("GPU:1", "law four") not in mixed.law_calls(), mixed.law_calls())
check("garbage where an outcome belongs is a Fail that says so", statuses.get(("GPU:1", "law five")) == "Fail" and
      "no outcome" in next(c["message"] for c in report["cases"] if c["device"] == "GPU:1" and c["law"] == "law five"))
check("a failed law is rerun once (--retries 1), an expected failure not",
      mixed.law_calls().count(("GPU:0", "law one")) == 2 and mixed.law_calls().count(("GPU:1", "law one")) == 1,
      mixed.law_calls())
check("the run with failures exits 1", done.returncode == 1, done.stderr)
figures = {f["name"]: f["status"] for f in report.get("bench", {}).get("figures", [])}
check("a figure that holds is a Pass, one that regressed then held a Flake, one that stayed worse a Fail",
      figures.get("submit") == "Pass" and figures.get("grid") == "Flake" and figures.get("load") == "Fail", figures)
check("a bench that dies is a Crash", figures.get("copy") == "Crash", figures)
check("the regression is named", report.get("bench", {}).get("regressions") == ["load"], report.get("bench"))
cases = mixed.junit_cases()
check("the JUnit XML fails the Fail, the Crash and the UnexpectedPass, and passes the ExpectedFail",
      all(cases[("conform.GPU:0", n)].find("failure") is not None for n in ("law one", "law two")) and
      cases[("conform.GPU:1", "law two")].find("failure") is not None and
      cases[("conform.GPU:1", "law one")].find("failure") is None, list(cases))

timing = Case(outcomes={"GPU:0": {"law two": "sleep"}})
done, report = timing.run("--device", "GPU:0", "--no-bench", "--retries", "0")
check("a law that runs past its time is a Timeout, and the run goes on",
      timing.statuses(report).get(("GPU:0", "law two")) == "Timeout" and
      timing.statuses(report).get(("GPU:0", "law three")) == "Pass" and done.returncode == 1,
      timing.statuses(report))
check("a usage error exits 2", timing.run("--shard", "4/3")[0].returncode == 2)

# --- A hang: quarantine, the kernel's log, the host's mark, its clearing. -------------------
hang = Case(outcomes={"GPU:0": {"law two": "hang"}})
done, report = hang.run()
statuses = hang.statuses(report)
check("a device lost after hang_ms is a Hang", statuses.get(("GPU:0", "law two")) == "Hang", statuses)
check("and no more laws go to it", all(statuses.get(("GPU:0", law)) == "Skip" for law in LAWS[2:]) and
      not any(c == ("GPU:0", law) for c in hang.law_calls() for law in LAWS[2:]), hang.law_calls())
check("the other device's laws still run", all(statuses.get(("GPU:1", law)) == "Pass" for law in LAWS), statuses)
check("no bench runs after a GPU was lost", {f["name"]: f["status"] for f in report["bench"]["figures"]} ==
      {"submit": "Skip"} and not any("bench" in l for l in open(hang.scenario + ".calls") if '"--json"' in l),
      report.get("bench"))
check("the hang fails the run", done.returncode == 1, done.stderr)
dmesg = os.path.join(hang.out, "dmesg.txt")
check("the kernel's log since the run started is kept", os.path.exists(dmesg) and
      "GPU reset begin" in open(dmesg).read() and "long before" not in open(dmesg).read())
check("and its reset line is in the report", any("GPU reset" in l for lost in report.get("lost", [])
                                                 for l in lost["dmesg"].get("notable", [])), report.get("lost"))
page = open(os.path.join(hang.out, "hwtest.html")).read()
check("the HTML page shows the hang, the loss and the kernel log's reset line",
      '>Hang</td>' in page and "GPU:0 lost" in page and '<pre class="dmesg">' in page and "GPU reset" in page,
      page[-1500:])
mark = hang.lock + ".unhealthy"
check("the host is marked unhealthy beside its lock, with the reason", os.path.exists(mark) and
      "GPU:0" in open(mark).read() and "no progress for 2000 ms" in open(mark).read())
refused, report = hang.run()
check("a later run is refused as an infrastructure error", refused.returncode == 3 and
      "unhealthy" in refused.stderr and hang.law_calls().count(("GPU:1", "law one")) == 1, refused.stderr)
still, _ = hang.run("--health-check")
check("--health-check fails while the GPU is still lost, and the mark stays", still.returncode == 3 and
      os.path.exists(mark), still.stderr)
os.remove(hang.scenario + ".lost")  # the GPU came back after a reset
cleared, _ = hang.run("--health-check")
check("--health-check clears the mark once every device is healthy", cleared.returncode == 0 and
      not os.path.exists(mark), cleared.stderr)
write(hang.scenario, {"devices": DEVICES, "laws": [HEALTH, *LAWS], "benches": {"submit": [100]}})
again, _ = hang.run()
check("and the host runs again", again.returncode == 0, again.stderr)

lose = Case(outcomes={"GPU:1": {"law five": "lose"}})
done, report = lose.run(dmesg=dmesg_denied)
statuses = lose.statuses(report)
check("a loss not of the law's own doing, confirmed by a failed health check, quarantines the device",
      statuses.get(("GPU:1", "law five")) == "Fail" and statuses.get(("GPU:1", "law six")) == "Skip" and
      os.path.exists(lose.lock + ".unhealthy"), statuses)
check("an unreadable kernel log is said to be so", any(not l["dmesg"]["readable"] and "unreadable" in
                                                       l["dmesg"]["message"] for l in report.get("lost", [])),
      report.get("lost"))

# --- kill -9 mid-run, then --resume; --deadline. -------------------------------------------
slow = Case(outcomes={"*": {law: "slow" for law in LAWS}})
runner = subprocess.Popen(slow.command(), env=slow.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
seen = []
limit = time.monotonic() + 60
while time.monotonic() < limit:
    if os.path.exists(os.path.join(slow.out, "results.jsonl")):
        with open(os.path.join(slow.out, "results.jsonl")) as f:
            seen = [l for l in f if '"kind": "case"' in l]
        if len(seen) >= 4:
            break
    time.sleep(0.05)
os.kill(runner.pid, signal.SIGKILL)
runner.wait()
time.sleep(0.5)  # the rig it was running ends on its own
records = slow.records()
cases = [r for r in records if r["kind"] == "case"]
check("after kill -9 the JSON lines hold every law run up to then", 4 <= len(cases) < len(everything), len(cases))
junit_cases = slow.junit_cases()
# The XML and the JSON report follow each line; a kill between the two leaves them a law behind.
check("and the JUnit XML, rebuilt at each step, holds the same laws",
      len(junit_cases) in (len(cases), len(cases) - 1) and
      {k[1] for k in junit_cases} <= {c["law"] for c in cases}, (len(junit_cases), len(cases)))
check("and the JSON report too", len(slow.report().get("cases", [])) in (len(cases), len(cases) - 1))
before = list(slow.law_calls())
done, report = slow.run("--resume")
check("--resume finishes the run", done.returncode == 0, done.stderr)
check("with every law recorded once", slow.statuses(report) == {c: "Pass" for c in everything},
      slow.statuses(report))
after = slow.law_calls()[len(before):]
check("and redoes none that was recorded", not ({(c["device"], c["law"]) for c in cases} & set(after)) and
      len(after) + len(cases) == len(everything), (cases, after))

late = Case(outcomes={"*": {law: "slow" for law in LAWS}})
started = time.monotonic()
done, report = late.run("--deadline", "5", "--no-bench")
check("--deadline stops the run in time", time.monotonic() - started < 7, time.monotonic() - started)
check("a run cut off by its deadline is an infrastructure error, saying so", done.returncode == 3 and
      any("deadline" in e for e in report.get("errors", [])) and 0 < len(report["cases"]) < len(everything),
      (done.returncode, report.get("errors"), len(report.get("cases", []))))
done, report = late.run("--resume", "--no-bench")
check("and --resume completes it", done.returncode == 0 and late.statuses(report) == {c: "Pass" for c in everything},
      done.stderr)

# --- Shards, patterns, fractions. ---------------------------------------------------------
many = [f"law {i:02d}" for i in range(20)]
shards = Case(laws=many)
covered = []
for i in (1, 2, 3):
    done, report = shards.run("--shard", f"{i}/3", "--no-bench", "--no-bench")
    check(f"shard {i}/3 passes", done.returncode == 0, done.stderr)
    covered += list(shards.statuses(report))
check("the shards cover every law on every device exactly once",
      sorted(covered) == sorted((d["name"], law) for d in DEVICES for law in [HEALTH, *many]), sorted(covered))
done, again = shards.run("--shard", "3/3", "--no-bench")
check("a shard is the same laws every time", sorted(shards.statuses(again)) == sorted(shards.statuses(report)))
done, report = shards.run("--law", "law 1*", "--device", "GPU:0", "--no-bench")
check("--law chooses the laws its pattern matches",
      sorted(l for _, l in shards.statuses(report)) == [f"law {i}" for i in range(10, 20)], shards.statuses(report))
done, report = shards.run("--fraction", "4", "--no-bench")
check("--fraction 4 runs a quarter", len(shards.statuses(report)) == 11, len(shards.statuses(report)))
done, report = shards.run("--law", "no such law", "--no-bench")
check("patterns that choose no law are an infrastructure error, not a pass of nothing", done.returncode == 3,
      done.stderr)

tmp_holder.cleanup()
finish()
