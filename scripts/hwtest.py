#!/usr/bin/env python3
"""The hardware test runner: runs rig's conformance suite on every device of this machine and
its benchmarks, compares the figures with this machine's baseline, and writes one JUnit XML
and one JSON report for a CI system. Python standard library only.

    scripts/hwtest.py [--rig build/rig] [--out hwtest-results] [--baseline FILE]
                      [--update-baseline] [--device NAME]... [--bench NAME]... [--repeats N]

Steps, each reported whatever the others did:
  1. takes the lock (fcntl.flock on --lock, default /tmp/rig-hwtest.lock), waiting up to
     --lock-timeout seconds, so that two runs never share a GPU;
  2. finds the devices with `rig devices --json` (the report lists them all; --device
     names the ones the conformance suite runs on);
  3. runs `rig conform --junit FILE --device NAME` on each; a rig without the conform
     command is reported as such (a skipped test case) and the run goes on;
  4. runs `rig bench --json`, with `--compare BASELINE` when this machine has a baseline
     (--baseline, default bench/baselines/<hostname>.json): a figure more than 10 % worse
     than the baseline's (higher for times, lower for rates) is a regression;
     --update-baseline writes this run's figures as the baseline instead of comparing;
  5. writes OUT/hwtest.xml (every conformance suite, and a suite "bench" with a case per
     figure) and OUT/hwtest.json.

Exit status: 0 if every law held and no figure regressed; 1 if a law failed, a figure
regressed or a step could not run (also a rig without conform, under --require-conform);
2 for a usage error, a rig that cannot be run, or a lock not taken in time.
"""
import argparse
import datetime
import errno
import fcntl
import json
import os
import re
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(message):
    print(f"hwtest: {message}", file=sys.stderr, flush=True)


def tail(text, lines=40):
    return "\n".join((text or "").splitlines()[-lines:])


def default_rig():
    built = os.path.join(ROOT, "build", "rig")
    return built if os.path.exists(built) else "rig"


def default_baseline():
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "unknown"
    return os.path.join(ROOT, "bench", "baselines", f"{host}.json")


def parse_arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rig", default=default_rig(), help="the rig tool (default: build/rig, else rig on PATH)")
    p.add_argument("--out", default="hwtest-results", help="folder for the reports (default: hwtest-results)")
    p.add_argument("--baseline", default=default_baseline(),
                   help="this machine's figures (default: bench/baselines/<hostname>.json)")
    p.add_argument("--update-baseline", action="store_true",
                   help="write this run's figures as the baseline instead of comparing with it")
    p.add_argument("--device", action="append", default=[],
                   help="run the conformance suite on this device only (repeatable; default: every device)")
    p.add_argument("--bench", action="append", default=[],
                   help="run this bench only (repeatable; default: every bench)")
    p.add_argument("--repeats", type=int, default=None, help="rig bench --repeats")
    p.add_argument("--no-bench", action="store_true", help="run no benchmarks")
    p.add_argument("--no-conform", action="store_true", help="run no conformance suite")
    p.add_argument("--require-conform", action="store_true",
                   help="fail when rig has no conform command (default: report it and go on)")
    p.add_argument("--lock", default=os.environ.get("RIG_HWTEST_LOCK", "/tmp/rig-hwtest.lock"),
                   help="the lock file every run on this machine takes (default: $RIG_HWTEST_LOCK "
                        "or /tmp/rig-hwtest.lock)")
    p.add_argument("--lock-timeout", type=float, default=3600,
                   help="seconds to wait for the lock (default: 3600)")
    p.add_argument("--timeout", type=float, default=3600,
                   help="seconds each rig command may take (default: 3600)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------
# The lock.

class Lock:
    """An exclusive flock on a file, held until the process exits or release()."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def take(self, timeout):
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:  # another user's lock file: read-only still locks
            self.fd = os.open(self.path, os.O_RDONLY)
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() >= deadline:
                return False
            if not told:
                log(f"waiting for the lock {self.path}, held by {self.holder()}")
                told = True
            time.sleep(0.5)
        try:  # say who holds it, for the next one who waits
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, f"{os.getpid()} {socket.gethostname()} {now()}\n".encode(), 0)
        except OSError:
            pass
        return True

    def holder(self):
        try:
            with open(self.path) as f:
                return f.read().strip() or "another run"
        except OSError:
            return "another run"

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# ---------------------------------------------------------------------------------------
# Running rig.

def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def run_rig(rig, args, timeout):
    """(returncode, stdout, stderr); returncode None if it timed out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_PROFILE")}
    try:
        done = subprocess.run([rig, *args], capture_output=True, text=True, timeout=timeout, env=env)
        return done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return None, out, err + f"\n(timed out after {timeout:.0f} s)"


def rig_commands(rig, timeout):
    """The subcommands `rig --help` lists."""
    code, out, err = run_rig(rig, ["--help"], timeout)
    commands = set()
    in_list = False
    for line in (out + "\n" + err).splitlines():
        if line.strip().upper().startswith("SUBCOMMANDS"):
            in_list = True
            continue
        if in_list:
            m = re.match(r"^\s+([a-z][a-z0-9_-]*)\s", line + " ")
            if m:
                commands.add(m.group(1))
            elif line.strip() == "":
                continue
            else:
                in_list = False
    return commands


def find_devices(rig, timeout, report):
    code, out, err = run_rig(rig, ["devices", "--json"], timeout)
    if code != 0:
        report["errors"].append(f"rig devices --json failed ({code}): {tail(err, 5)}")
        return []
    try:
        devices = json.loads(out)
    except ValueError as e:
        report["errors"].append(f"rig devices --json printed no JSON: {e}")
        return []
    report["devices"] = devices
    return [d["name"] for d in devices if isinstance(d, dict) and "name" in d]


# ---------------------------------------------------------------------------------------
# Conformance.

def count_cases(suite):
    cases = suite.findall("testcase")
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    skipped = sum(1 for c in cases if c.find("skipped") is not None)
    return len(cases), failures, errors, skipped


def suite_element(name, cases):
    """A <testsuite> of (case name, classname, outcome, message, text) tuples, outcome one of
    passed, failure, error, skipped."""
    suite = ET.Element("testsuite", name=name)
    for case_name, classname, outcome, message, text in cases:
        case = ET.SubElement(suite, "testcase", name=case_name, classname=classname)
        if outcome != "passed":
            child = ET.SubElement(case, outcome, message=message)
            child.text = text
        elif text:
            ET.SubElement(case, "system-out").text = text
    total, failures, errors, skipped = count_cases(suite)
    suite.set("tests", str(total))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    return suite


def conform(rig, devices, out, timeout, available, report, suites):
    for device in devices:
        entry = {"device": device}
        report["conform"].append(entry)
        classname = f"conform.{device}"
        if not available:
            entry.update(status="unavailable",
                         message="this rig has no conform command: the conformance suite did not run")
            log(f"{device}: {entry['message']}")
            suites.append(suite_element(f"conform {device}", [
                ("conformance suite", classname, "skipped", entry["message"], "")]))
            continue
        junit = os.path.join(out, "conform-" + re.sub(r"[^A-Za-z0-9_.-]", "_", device) + ".xml")
        if os.path.exists(junit):
            os.remove(junit)
        log(f"{device}: rig conform --junit {junit} --device {device}")
        started = time.monotonic()
        code, stdout, stderr = run_rig(rig, ["conform", "--junit", junit, "--device", device], timeout)
        entry.update(returncode=code, seconds=round(time.monotonic() - started, 1), junit=junit,
                     output_tail=tail(stdout + stderr))
        parsed = []
        if os.path.exists(junit):
            try:
                root = ET.parse(junit).getroot()
                parsed = [root] if root.tag == "testsuite" else root.findall("testsuite")
            except ET.ParseError as e:
                entry["message"] = f"its JUnit XML does not parse: {e}"
        tests = failures = errors = skipped = 0
        for s in parsed:
            t, f, e, k = count_cases(s)
            tests, failures, errors, skipped = tests + t, failures + f, errors + e, skipped + k
            name = s.get("name", "")
            s.set("name", f"conform {device}" if name in ("", device) else f"conform {device}: {name}")
            suites.append(s)
        entry.update(tests=tests, failures=failures, errors=errors, skipped=skipped)
        if code == 0 and parsed and failures == 0 and errors == 0:
            entry["status"] = "passed"
        elif code == 1 and (failures or errors):
            entry["status"] = "failed"
        else:
            entry["status"] = "error"
            entry.setdefault("message", f"rig conform exited with {code}" if code is not None else "rig conform timed out")
            if not parsed or (code not in (0, 1)):
                suites.append(suite_element(f"conform {device} (run)", [
                    ("rig conform", classname, "error", entry["message"], tail(stdout + stderr))]))
        log(f"{device}: {entry['status']}: {tests} laws, {failures} failed, {errors} errors, {skipped} skipped")


# ---------------------------------------------------------------------------------------
# Benchmarks.

def bench(args, report, suites):
    entry = {"baseline": args.baseline, "baseline_updated": False}
    report["bench"] = entry
    command = ["bench", "--json", *args.bench]
    if args.repeats:
        command += ["--repeats", str(args.repeats)]
    comparing = os.path.exists(args.baseline) and not args.update_baseline
    if comparing:
        command += ["--compare", args.baseline]
    elif not args.update_baseline:
        entry["message"] = f"no baseline at {args.baseline}: figures are not compared (--update-baseline makes one)"
        log(entry["message"])
    log("rig " + " ".join(command))
    code, stdout, stderr = run_rig(args.rig, command, args.timeout)
    entry["returncode"] = code
    try:
        figures = json.loads(stdout)
        if not isinstance(figures, list):
            raise ValueError("not an array")
    except ValueError:
        entry.update(status="error", message=f"rig bench printed no figures (exit {code})", output_tail=tail(stderr))
        suites.append(suite_element("bench", [("rig bench", "bench", "error", entry["message"], tail(stderr))]))
        log(entry["message"] + "\n" + tail(stderr, 10))
        return
    entry["figures"] = figures
    regressions = [f["name"] for f in figures if f.get("regression")]
    entry["regressions"] = regressions
    cases = []
    for f in figures:
        text = (f"{f.get('value')} {f.get('unit')} (min {f.get('min')}, max {f.get('max')}); floor "
                f"{f.get('floor')} {f.get('unit')}: {f.get('floor_name')}; {f.get('note')}")
        if comparing:
            text += f"; baseline {f.get('baseline')}"
        if f.get("regression"):
            worse = f.get("worse_by")
            message = (f"{f['name']}: {f.get('value'):.2f} {f.get('unit')} against {f.get('baseline'):.2f} in the "
                       f"baseline, " + (f"{100 * worse:.1f}% worse" if worse is not None else "worse")
                       + " (more than 10%)")
            cases.append((f["name"], "bench", "failure", message, text))
        else:
            cases.append((f["name"], "bench", "passed", "", text))
    suites.append(suite_element("bench", cases))
    if regressions:
        entry["status"] = "regressed"
        log("regressions: " + ", ".join(regressions))
    elif code != 0:
        entry.update(status="error", message=f"rig bench exited with {code}", output_tail=tail(stderr))
    else:
        entry["status"] = "passed" if comparing else "measured"
    if args.update_baseline and code == 0:
        keep = ("name", "value", "min", "max", "unit", "floor", "floor_name", "ratio", "note")
        os.makedirs(os.path.dirname(os.path.abspath(args.baseline)), exist_ok=True)
        with open(args.baseline, "w") as f:
            json.dump([{k: fig[k] for k in keep if k in fig} for fig in figures], f, indent=2)
            f.write("\n")
        entry["baseline_updated"] = True
        log(f"wrote the baseline {args.baseline}")


# ---------------------------------------------------------------------------------------

def main(argv):
    args = parse_arguments(argv)
    os.makedirs(args.out, exist_ok=True)
    report = {"host": socket.gethostname(), "started": now(), "rig": args.rig, "devices": [], "conform": [],
              "bench": None, "errors": []}
    lock = Lock(args.lock)
    try:
        taken = lock.take(args.lock_timeout)
    except OSError as e:
        log(f"cannot take the lock {args.lock}: {e.strerror} (--lock names another file)")
        return 2
    if not taken:
        log(f"the lock {args.lock} was not free within {args.lock_timeout:.0f} s (held by {lock.holder()})")
        return 2
    try:
        commands = rig_commands(args.rig, 60)
    except OSError as e:
        log(f"cannot run {args.rig} ({e.strerror}): build rig first (meson setup build && ninja -C build), "
            "or pass --rig")
        return 2
    started = time.monotonic()
    suites = []

    found = find_devices(args.rig, args.timeout, report)
    if not args.no_conform:
        devices = args.device or found
        available = "conform" in commands
        if not available:
            log("this rig has no conform command yet: the conformance suite is skipped")
        conform(args.rig, devices, args.out, args.timeout, available, report, suites)
    if not args.no_bench:
        bench(args, report, suites)

    failed_laws = sum(1 for c in report["conform"] if c.get("status") in ("failed", "error"))
    missing = sum(1 for c in report["conform"] if c.get("status") == "unavailable")
    regressed = bool(report["bench"] and report["bench"].get("status") == "regressed")
    bench_error = bool(report["bench"] and report["bench"].get("status") == "error")
    ok = (not failed_laws and not regressed and not bench_error and not report["errors"]
          and not (missing and args.require_conform))
    report.update(finished=now(), seconds=round(time.monotonic() - started, 1), ok=ok)

    root = ET.Element("testsuites", name="rig hwtest")
    totals = [0, 0, 0, 0]
    for s in suites:
        root.append(s)
        for i, n in enumerate(count_cases(s)):
            totals[i] += n
    for error in report["errors"]:
        root.append(suite_element("hwtest", [("setup", "hwtest", "error", error, "")]))
        totals[2] += 1
    for key, n in zip(("tests", "failures", "errors", "skipped"), totals):
        root.set(key, str(n))
    xml_path = os.path.join(args.out, "hwtest.xml")
    ET.ElementTree(root).write(xml_path, encoding="utf-8", xml_declaration=True)
    json_path = os.path.join(args.out, "hwtest.json")
    with open(json_path, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    log(f"{'ok' if ok else 'FAILED'}: {totals[0]} cases, {totals[1]} failures, {totals[2]} errors, "
        f"{totals[3]} skipped; reports {xml_path} and {json_path}")
    lock.release()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
