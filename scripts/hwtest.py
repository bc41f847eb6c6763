#!/usr/bin/env python3
"""The hardware test runner: runs rig's conformance laws on every device of this machine, one
law at a time, and its benchmarks, and keeps crash-safe reports for a CI system. Python
standard library only; rig's own commands do the work (docs/ci.md says how CI uses it).

    scripts/hwtest.py [--rig build/tools/rig] [--out hwtest-results] [--expect FILE] [--fails FILE]
                      [--flakes FILE] [--skips FILE] [--law PATTERN]... [--shard I/N]
                      [--deadline SECONDS] [--resume] [--health-check] ...

Steps:
  1. takes the lock (fcntl.flock on --lock, default /tmp/rig-hwtest.lock), waiting up to
     --lock-timeout seconds, so that two runs never share a GPU; refuses to run while the host
     is marked unhealthy (the file LOCK.unhealthy), until --health-check passes;
  2. finds the devices with `rig devices --json`, reads their driver and firmware versions,
     and checks them against this host's expectation (--expect, default
     bench/baselines/<host>.expect.json): a device missing or different is an infrastructure
     error;
  3. checks each device's health (a few basic laws: open, copy, a reader sees the last writer);
  4. runs each law on each device as its own `rig conform --device D --law NAME` with a
     timeout, rerunning a failed law --retries times, and judges it against the known
     failures, flakes and skips of this host;
  5. runs each bench as its own `rig bench NAME --json --compare BASELINE`, re-measuring a
     bench whose figures regressed.

After every law and every bench it appends the result to OUT/results.jsonl (fsync'd) and
rebuilds OUT/hwtest.xml (JUnit), OUT/hwtest.json (with each law's and figure's seconds and
the ten slowest steps) and OUT/hwtest.html (a page for people: scripts/hwtest_report.py) from it, so that a run killed at any
point leaves everything up to its last step; --resume continues such a run.

Statuses: Pass, Fail, Crash (rig died by a signal), Timeout, Hang (a device lost after
hang_ms with no progress), Skip, Flake (failed, then passed on a rerun), KnownFlake,
ExpectedFail, UnexpectedPass.

Exit status: 0 every law held (or failed as expected) and no figure regressed; 1 a test
failed (Fail, Crash, Timeout, Hang, UnexpectedPass, a regressed figure); 2 a usage error,
a rig that cannot be run, or a lock not taken in time; 3 an infrastructure error (devices
missing or unlike the expectation, an unhealthy host, a failed health check, no law run, a
run cut off by --deadline): the commit is not to blame, retry elsewhere. 3 wins over 1.
"""
import argparse
import datetime
import errno
import fcntl
import fnmatch
import getpass
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hwtest_report  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PASS, FAIL, CRASH, TIMEOUT, HANG, SKIP = "Pass", "Fail", "Crash", "Timeout", "Hang", "Skip"
FLAKE, KNOWN_FLAKE, EXPECTED_FAIL, UNEXPECTED_PASS = "Flake", "KnownFlake", "ExpectedFail", "UnexpectedPass"
FAILING = (FAIL, CRASH, TIMEOUT, HANG, UNEXPECTED_PASS)   # what makes a run exit 1
BROKEN = (FAIL, CRASH, TIMEOUT, HANG)                     # what a law's own run can end in, short of passing

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INFRA = 0, 1, 2, 3

# The laws of the health check: opening a device, a copy, and work that a reader waits for.
HEALTH_LAWS = ["facts are well formed", "io: it computes nothing*", "copies are the identity*",
               "io: copies are the identity*", "a reader sees the last writer*"]


def log(message):
    print(f"hwtest: {message}", file=sys.stderr, flush=True)


def tail(text, lines=40):
    return "\n".join((text or "").splitlines()[-lines:])


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def host_name():
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "unknown"


def default_rig():
    for built in (os.path.join(ROOT, "build", "tools", "rig"), os.path.join(ROOT, "build", "rig")):
        if os.path.exists(built):
            return built
    return "rig"


def beside_baseline(suffix):
    return os.path.join(ROOT, "bench", "baselines", f"{host_name()}{suffix}")


def parse_arguments(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rig", default=default_rig(), help="the rig tool (default: build/tools/rig, else rig on PATH)")
    p.add_argument("--out", default="hwtest-results", help="folder for the reports (default: hwtest-results)")
    p.add_argument("--baseline", default=beside_baseline(".json"),
                   help="this machine's figures (default: bench/baselines/<host>.json)")
    p.add_argument("--update-baseline", action="store_true",
                   help="write this run's figures as the baseline instead of comparing with it")
    p.add_argument("--expect", default=beside_baseline(".expect.json"),
                   help="the devices this host must show (default: bench/baselines/<host>.expect.json)")
    p.add_argument("--fails", default=beside_baseline(".fails.json"),
                   help="laws known to fail on this host (default: bench/baselines/<host>.fails.json)")
    p.add_argument("--flakes", default=beside_baseline(".flakes.json"),
                   help="laws known to flake on this host (default: bench/baselines/<host>.flakes.json)")
    p.add_argument("--skips", default=beside_baseline(".skips.json"),
                   help="laws never to run on this host (default: bench/baselines/<host>.skips.json)")
    p.add_argument("--device", action="append", default=[],
                   help="run the laws on this device only (repeatable; default: every device rig devices "
                        "shows; any target of rig conform --list, such as MEM or DISK, may be named)")
    p.add_argument("--law", action="append", default=[],
                   help="run this law only: a name or a pattern with * and ? (repeatable)")
    p.add_argument("--caselist", action="append", default=[],
                   help="a file of law names or patterns, one a line (# starts a comment)")
    p.add_argument("--shard", default=None, help="I/N: run the I-th (1..N) of N disjoint parts of the laws")
    p.add_argument("--fraction", type=int, default=1, help="run every N-th law of those chosen (default: 1)")
    p.add_argument("--retries", type=int, default=1, help="reruns of a failed law before it counts (default: 1)")
    p.add_argument("--law-timeout", type=int, default=60, help="seconds a law may run (default: 60)")
    p.add_argument("--bench-timeout", type=float, default=1800, help="seconds a bench may run (default: 1800)")
    p.add_argument("--deadline", type=float, default=None,
                   help="stop cleanly this many seconds after the start (set it below the CI job's timeout)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run recorded in OUT/results.jsonl, redoing nothing it recorded")
    p.add_argument("--health-check", action="store_true",
                   help="check every device's health, clear the host's unhealthy mark if they pass, and exit")
    p.add_argument("--dmesg", default="dmesg", help="the command that prints the kernel's log (default: dmesg)")
    p.add_argument("--bench", action="append", default=[],
                   help="run this bench only (repeatable; default: every bench)")
    p.add_argument("--bench-device", default=None, help="rig bench --device, where a bench allows a choice")
    p.add_argument("--repeats", type=int, default=None, help="rig bench --repeats")
    p.add_argument("--no-bench", action="store_true", help="run no benchmarks")
    p.add_argument("--no-conform", action="store_true", help="run no conformance laws")
    p.add_argument("--require-conform", action="store_true",
                   help="fail when rig has no conform command (default: report it and go on)")
    p.add_argument("--lock", default=os.environ.get("RIG_HWTEST_LOCK", "/tmp/rig-hwtest.lock"),
                   help="the lock file every run on this machine takes (default: $RIG_HWTEST_LOCK "
                        "or /tmp/rig-hwtest.lock)")
    p.add_argument("--lock-timeout", type=float, default=3600,
                   help="seconds to wait for the lock (default: 3600)")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds any other rig command may take (default: 600)")
    args = p.parse_args(argv)
    if args.shard is not None:
        m = re.fullmatch(r"(\d+)/(\d+)", args.shard)
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            p.error(f"--shard takes I/N with 1 <= I <= N, such as 2/4, not {args.shard!r}")
        args.shard = (int(m.group(1)), int(m.group(2)))
    if args.fraction < 1 or args.retries < 0 or args.law_timeout < 1:
        p.error("--fraction and --law-timeout take 1 or more, --retries 0 or more")
    return args


class UsageError(Exception):
    pass


class InfraError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# The lock, and the mark of an unhealthy host beside it.

class Lock:
    """An exclusive flock on a file, held until the process exits or release()."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.holder_line = None

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
        job = os.environ.get("CI_JOB_URL") or os.environ.get("GITHUB_RUN_ID") or ""
        self.holder_line = f"{os.getpid()} {user()}@{socket.gethostname()} {now()} {job}".strip()
        try:  # say who holds it, for the next one who waits
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, (self.holder_line + "\n").encode(), 0)
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


def user():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def unhealthy_path(lock_path):
    return lock_path + ".unhealthy"


def read_unhealthy(lock_path):
    try:
        with open(unhealthy_path(lock_path)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        return {"reason": f"the mark {unhealthy_path(lock_path)} is unreadable ({e})"}


def mark_unhealthy(lock_path, reason, device, out):
    mark = {"host": socket.gethostname(), "since": now(), "device": device, "reason": reason,
            "results": os.path.abspath(out)}
    write_atomically(unhealthy_path(lock_path), json.dumps(mark, indent=2) + "\n")
    log(f"marked this host unhealthy ({unhealthy_path(lock_path)}): {reason}; "
        "later runs are refused until scripts/hwtest.py --health-check passes")


# ---------------------------------------------------------------------------------------
# Files that survive a kill.

def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".hwtest-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)


class Results:
    """OUT/results.jsonl, one record a line, each appended and fsync'd as it comes; and the
    JUnit XML and JSON report rebuilt from the records after each."""

    def __init__(self, out, resume):
        self.out = out
        self.path = os.path.join(out, "results.jsonl")
        self.records = []
        if resume and os.path.exists(self.path):
            with open(self.path) as f:
                for line in f:
                    try:
                        self.records.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short by a kill
        self.file = open(self.path, "a" if resume else "w")
        self.summary = lambda records: {}

    def add(self, record):
        self.records.append(record)
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())
        self.rebuild()

    def rebuild(self):
        write_atomically(os.path.join(self.out, "hwtest.xml"), junit(self.records))
        summary = self.summary(self.records)
        write_atomically(os.path.join(self.out, "hwtest.json"), json.dumps(summary, indent=2) + "\n")
        if summary:
            write_atomically(os.path.join(self.out, "hwtest.html"), hwtest_report.page(summary))

    def done_cases(self):
        """(device, law) of the laws recorded with an outcome, to be left alone on --resume."""
        return {(r["device"], r["law"]) for r in self.records if r.get("kind") == "case" and not r.get("not_run")}

    def done_benches(self):
        return {r["bench"] for r in self.records if r.get("kind") == "bench"}


def xml_text(text):
    """The text without the characters XML 1.0 forbids (a crashed rig's output may hold them)."""
    return re.sub(r"[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]", "\ufffd", str(text))


def junit(records):
    root = ET.Element("testsuites", name="rig hwtest")
    suites = {}

    def case(suite_name, name, classname, outcome, message="", text=""):
        suite_name, name, classname, message, text = map(xml_text, (suite_name, name, classname, message, text))
        if suite_name not in suites:
            suites[suite_name] = ET.SubElement(root, "testsuite", name=suite_name)
        c = ET.SubElement(suites[suite_name], "testcase", name=name, classname=classname)
        if outcome != "passed":
            ET.SubElement(c, outcome, message=message).text = text
        elif text:
            ET.SubElement(c, "system-out").text = text
        return c

    latest = {}
    for r in records:  # a later record of a law (a resumed run's) replaces an earlier one
        if r.get("kind") == "case":
            latest[(r["device"], r["law"])] = r
    for r in records:
        kind = r.get("kind")
        if kind == "case" and latest.get((r["device"], r["law"])) is r:
            status, message = r["status"], r.get("message", "")
            text = f"{status}: {message}" + "".join(f"\nattempt {i + 1}: {a['status']}: {a.get('message', '')}"
                                                   for i, a in enumerate(r.get("attempts", [])))
            outcome = "failure" if status in FAILING else "skipped" if status == SKIP else "passed"
            c = case(f"conform {r['device']}", r["law"], f"conform.{r['device']}", outcome, f"{status}: {message}",
                     text if outcome != "passed" or status != PASS else "")
            c.set("time", f"{r.get('seconds', 0):.2f}")
        elif kind == "figure":
            outcome = "failure" if r["status"] in FAILING else "skipped" if r["status"] == SKIP else "passed"
            case("bench", r["name"], "bench", outcome, r.get("message", ""), r.get("text", ""))
        elif kind == "infra":
            case("hwtest", r.get("step", "setup"), "hwtest", "error", r["message"], r.get("detail", ""))
    totals = [0, 0, 0, 0]
    for s in root:
        cases = s.findall("testcase")
        counts = (len(cases), sum(c.find("failure") is not None for c in cases),
                  sum(c.find("error") is not None for c in cases), sum(c.find("skipped") is not None for c in cases))
        for key, n in zip(("tests", "failures", "errors", "skipped"), counts):
            s.set(key, str(n))
        totals = [a + b for a, b in zip(totals, counts)]
    for key, n in zip(("tests", "failures", "errors", "skipped"), totals):
        root.set(key, str(n))
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ---------------------------------------------------------------------------------------
# Running rig.

class Ran:
    def __init__(self, code, out, err, timed_out=False, seconds=0.0):
        self.code, self.out, self.err, self.timed_out, self.seconds = code, out, err, timed_out, seconds

    @property
    def signal(self):
        """The signal's name if the process died by one, else None."""
        if self.code is not None and self.code < 0:
            try:
                return signal.Signals(-self.code).name
            except ValueError:
                return f"signal {-self.code}"
        return None


def run_rig(rig, args, timeout):
    """Runs rig in a session of its own, killing the whole session after timeout seconds (a
    hung law leaves threads blocked in a driver)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_PROFILE")}
    started = time.monotonic()
    process = subprocess.Popen([rig, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               errors="replace", env=env, start_new_session=True)
    try:
        out, err = process.communicate(timeout=max(timeout, 0.1))
        return Ran(process.returncode, out, err, seconds=time.monotonic() - started)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = process.communicate()
        return Ran(None, out, err, timed_out=True, seconds=time.monotonic() - started)
    except BaseException:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        raise


def help_text(rig, args, timeout):
    ran = run_rig(rig, [*args, "--help"], timeout)
    return ran.out + "\n" + ran.err


def rig_commands(rig, timeout):
    """The subcommands `rig --help` lists."""
    commands = set()
    in_list = False
    for line in help_text(rig, [], timeout).splitlines():
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


def bench_names(rig, timeout):
    """The benches `rig bench --help` names ("benches to run: a, b, c (default: all)")."""
    m = re.search(r"benches to run:\s*([a-z0-9_, -]+?)\s*\(default", help_text(rig, ["bench"], timeout))
    return [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []


# ---------------------------------------------------------------------------------------
# The host: its kernel, devices, versions and the expectation.

def sysroot():
    return os.environ.get("RIG_HWTEST_SYSROOT", "/")


def read_text(*parts):
    try:
        with open(os.path.join(sysroot(), *parts)) as f:
            return f.read().strip()
    except OSError:
        return None


def versions(device):
    """The driver and firmware versions of a device, where rig reports them or sysfs/procfs
    shows them; None where neither does."""
    pci = device.get("pci") or {}
    address, driver = pci.get("address"), pci.get("driver")
    driver_version = device.get("driver_version")
    if driver_version is None and driver:
        driver_version = read_text("sys", "module", driver, "version")
        if driver_version is None and driver == "nvidia":
            line = (read_text("proc", "driver", "nvidia", "version") or "").splitlines()[:1]
            m = re.search(r"Kernel Module\s+(\S+)", line[0]) if line else None
            driver_version = m.group(1) if m else None
        if driver_version is None and os.path.isdir(os.path.join(sysroot(), "sys", "module", driver)):
            driver_version = f"in-tree ({os.uname().release})"
    firmware = device.get("firmware")
    if firmware is None and address:
        firmware = read_text("sys", "bus", "pci", "devices", address, "vbios_version")
        if firmware is None:
            info = read_text("proc", "driver", "nvidia", "gpus", address, "information") or ""
            m = re.search(r"Video BIOS:\s*(\S+)", info)
            firmware = m.group(1) if m else None
    return {"driver": driver, "driver_version": driver_version, "firmware": firmware, "pci": address}


def find_devices(rig, timeout):
    """rig devices --json, each device with its versions; InfraError when it cannot say."""
    ran = run_rig(rig, ["devices", "--json"], timeout)
    if ran.code != 0:
        why = f"died by {ran.signal}" if ran.signal else "timed out" if ran.timed_out else f"exited {ran.code}"
        raise InfraError(f"rig devices --json {why}: {tail(ran.err, 5)}")
    try:
        devices = json.loads(ran.out)
        if not isinstance(devices, list) or not all(isinstance(d, dict) and "name" in d for d in devices):
            raise ValueError("not an array of devices with names")
    except ValueError as e:
        raise InfraError(f"rig devices --json printed no devices ({e}): {tail(ran.out, 3)}")
    for d in devices:
        d["versions"] = versions(d)
    return devices


EXPECTED_FIELDS = {"arch": lambda d: d.get("arch"), "pci": lambda d: d["versions"]["pci"],
                   "driver": lambda d: d["versions"]["driver"],
                   "driver_version": lambda d: d["versions"]["driver_version"],
                   "firmware": lambda d: d["versions"]["firmware"]}


def check_expectation(path, devices):
    """The differences between the devices found and the expectation file, as sentences; None
    when there is no file."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            expect = json.load(f)
        wanted = expect["devices"]
        if not isinstance(wanted, list) or not all(isinstance(w, dict) and "name" in w for w in wanted):
            raise ValueError('"devices" is not an array of objects with a "name"')
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"the expectation {path} is unreadable: {e}"]
    found = {d["name"]: d for d in devices}
    problems = []
    for w in wanted:
        d = found.get(w["name"])
        if d is None:
            problems.append(f"{w['name']} is missing (rig devices shows {', '.join(found) or 'no device'})")
            continue
        for field, get in EXPECTED_FIELDS.items():
            if field in w and w[field] is not None and str(get(d)) != str(w[field]):
                problems.append(f"{w['name']}: {field} is {get(d)}, the expectation says {w[field]}")
    if expect.get("only"):
        extra = sorted(set(found) - {w["name"] for w in wanted})
        if extra:
            problems.append(f"devices not in the expectation: {', '.join(extra)}")
    return problems


def build_facts(rig):
    """rig's commit and build type, where the checkout and the build folder say."""
    facts = {"commit": None, "dirty": None, "buildtype": None}
    where = os.path.dirname(os.path.abspath(rig)) if os.path.sep in rig else ROOT
    try:
        git = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if git.returncode == 0:
            facts["commit"] = git.stdout.strip()
            status = subprocess.run(["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                                    capture_output=True, text=True, timeout=10)
            facts["dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    folder = where
    while folder != os.path.dirname(folder):
        options = os.path.join(folder, "meson-info", "intro-buildoptions.json")
        if os.path.exists(options):
            try:
                with open(options) as f:
                    facts["buildtype"] = next((o["value"] for o in json.load(f) if o.get("name") == "buildtype"), None)
            except (OSError, ValueError):
                pass
            break
        folder = os.path.dirname(folder)
    return facts


def uptime():
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def capture_dmesg(command, since_uptime, out):
    """The kernel's log lines since the run started, written to OUT/dmesg.txt; the lines that
    tell of a GPU reset or fault (amdgpu resets, NVRM Xid) apart."""
    try:
        ran = subprocess.run(command, shell=True, capture_output=True, text=True, errors="replace", timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"readable": False, "message": f"dmesg could not run: {e}"}
    if ran.returncode != 0:
        return {"readable": False, "message": f"dmesg is unreadable here ({tail(ran.stderr, 2).strip() or ran.returncode}): "
                                              "no kernel log was kept (sudo sysctl kernel.dmesg_restrict=0 allows it)"}
    lines = []
    for line in ran.stdout.splitlines():
        m = re.match(r"\[\s*(\d+\.\d+)\]", line)
        if since_uptime is None or not m or float(m.group(1)) >= since_uptime - 1:
            lines.append(line)
    with open(os.path.join(out, "dmesg.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    notable = [l for l in lines if re.search(r"amdgpu.*(reset|timeout|fault|hang)|NVRM: Xid|GPU has fallen off",
                                             l, re.IGNORECASE)]
    return {"readable": True, "lines": len(lines), "notable": notable[-50:], "file": os.path.join(out, "dmesg.txt")}


# ---------------------------------------------------------------------------------------
# Known failures, flakes and skips.

def read_list(path, what):
    """A JSON array of {"device": PATTERN, "law": PATTERN, "reason": ..., "issue": ...}."""
    if not os.path.exists(path):
        return []
    try:
        with open(path) as f:
            entries = json.load(f)
        if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("law"), str)
                                                    for e in entries):
            raise ValueError('not an array of objects with a "law"')
    except (OSError, ValueError) as e:
        raise UsageError(f"the {what} file {path} is unreadable: {e}")
    return entries


def matching(entries, device, law):
    for e in entries:
        if fnmatch.fnmatchcase(device, e.get("device", "*")) and (e["law"] == law or fnmatch.fnmatchcase(law, e["law"])):
            return e
    return None


def about(entry):
    return "; ".join(x for x in (entry.get("reason"), entry.get("issue")) if x) or "listed"


# ---------------------------------------------------------------------------------------
# Laws.

def law_patterns(args):
    patterns = list(args.law)
    for path in args.caselist:
        try:
            with open(path) as f:
                patterns += [l.split("#", 1)[0].strip() for l in f if l.split("#", 1)[0].strip()]
        except OSError as e:
            raise UsageError(f"cannot read the caselist {path}: {e.strerror}")
    return patterns


def in_shard(device, law, shard):
    index, count = shard
    digest = hashlib.sha256(f"{device}\n{law}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count == index - 1


def choose(cases, args):
    """The (device, law) pairs of this run: those the patterns name, in this shard, every
    --fraction-th."""
    patterns = law_patterns(args)
    if patterns:
        cases = [c for c in cases if any(c[1] == p or fnmatch.fnmatchcase(c[1], p) for p in patterns)]
    if args.shard:
        cases = [c for c in cases if in_shard(*c, args.shard)]
    return cases[::args.fraction]


def list_laws(rig, device, timeout):
    ran = run_rig(rig, ["conform", "--device", device, "--list"], timeout)
    laws = [line.split("\t", 1)[1] for line in ran.out.splitlines() if line.startswith(device + "\t")]
    if ran.code != 0 or not laws:
        why = f"died by {ran.signal}" if ran.signal else "timed out" if ran.timed_out else f"exited {ran.code}"
        raise InfraError(f"rig conform --device {device} --list {why} and named no law: {tail(ran.err + ran.out, 5)}")
    return laws


def parse_junit(path):
    """{law: (status, message)} from rig conform's JUnit XML; None if there is none."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    outcomes = {}
    for c in root.iter("testcase"):
        failure, skipped = c.find("failure"), c.find("skipped")
        if failure is not None:
            outcomes[c.get("name")] = (FAIL, failure.get("message") or (failure.text or "").strip())
        elif skipped is not None:
            outcomes[c.get("name")] = (SKIP, skipped.get("message") or "")
        else:
            outcomes[c.get("name")] = (PASS, "")
    return outcomes


def classify(status, message):
    """A failure's cause, from what rig said of it."""
    if status != FAIL:
        return status
    if re.search(r"lost: no progress for \d+ ms", message):
        return HANG
    if "did not finish within" in message:
        return TIMEOUT
    return FAIL


def conform_laws(rig, device, laws, timeout, out, law_timeout):
    """Runs the laws on the device in one rig conform: {law: (status, message, seconds)}, every
    law given having one."""
    junit_path = os.path.join(out, ".law.xml")
    if os.path.exists(junit_path):
        os.remove(junit_path)
    command = ["conform", "--device", device, "--junit", junit_path, "--law-timeout", str(law_timeout)]
    for law in laws:
        command += ["--law", law]
    ran = run_rig(rig, command, timeout)
    parsed = parse_junit(junit_path) or {}
    results = {}
    for law in laws:
        if ran.timed_out:
            results[law] = (TIMEOUT, f"rig conform ran past {timeout:.0f} s and was killed", ran.seconds)
        elif ran.signal:
            results[law] = (CRASH, f"rig conform died by {ran.signal}: {tail(ran.err, 3)}", ran.seconds)
        elif law in parsed:
            status, message = parsed[law]
            results[law] = (classify(status, message), message, ran.seconds)
        else:
            results[law] = (FAIL, f"rig conform exited {ran.code} with no outcome for the law: "
                                  f"{tail(ran.out + ran.err, 3) or 'no output'}", ran.seconds)
    return results


class Run:
    def __init__(self, args, results):
        self.args = args
        self.results = results
        self.started = time.monotonic()
        self.started_uptime = uptime()
        self.lost = {}        # device: why no more work goes to it
        self.stopped = None   # why the run stopped early

    def remaining(self):
        if self.args.deadline is None:
            return float("inf")
        return self.args.deadline - (time.monotonic() - self.started)

    def budget(self, wanted):
        """The seconds a step may take, within the deadline; None if the deadline leaves too
        few for one (the run stops)."""
        left = self.remaining() - 1
        if left < min(wanted, 2):
            self.stop(f"the deadline of {self.args.deadline:.0f} s was reached: the rest did not run "
                      "(--resume continues)")
            return None
        return min(wanted, left)

    def stop(self, why):
        if not self.stopped:
            self.stopped = why
            log(why)
            self.results.add({"kind": "infra", "step": "deadline", "message": why, "time": now()})

    def health(self, devices):
        """Checks each device; {device: why it is unhealthy}."""
        bad = {}
        for device in devices:
            try:
                laws = list_laws(self.args.rig, device, self.args.timeout)
            except InfraError as e:
                bad[device] = str(e)
                continue
            chosen = [l for l in laws if any(l == p or fnmatch.fnmatchcase(l, p) for p in HEALTH_LAWS)] or laws[:1]
            got = conform_laws(self.args.rig, device, chosen, 30 + 10 * len(chosen), self.args.out, 10)
            broken = [f"{law}: {status}: {message}" for law, (status, message, _) in got.items()
                      if status not in (PASS, SKIP)]
            if broken:
                bad[device] = "; ".join(broken)
            log(f"health of {device}: " + ("FAILED: " + bad[device] if broken else "ok"))
        return bad

    def lose(self, device, why):
        """No more work goes to the device; the kernel's log is kept and the host marked."""
        if device in self.lost:
            return
        self.lost[device] = why
        log(f"{device} is lost: {why}; no more work goes to it")
        dmesg = capture_dmesg(self.args.dmesg, self.started_uptime, self.args.out)
        if not dmesg["readable"]:
            log(dmesg["message"])
        self.results.add({"kind": "lost", "device": device, "message": why, "dmesg": dmesg, "time": now()})
        mark_unhealthy(self.args.lock, f"{device} lost during a run: {why}", device, self.args.out)

    def conform_device(self, device, laws, fails, flakes, skips):
        done = self.results.done_cases()
        for law in laws:
            if self.stopped:
                return
            if (device, law) in done:
                continue
            if device in self.lost:
                self.results.add({"kind": "case", "device": device, "law": law, "status": SKIP, "not_run": True,
                                  "message": f"not run: {self.lost[device]}"})
                continue
            skip = matching(skips, device, law)
            if skip:
                self.results.add({"kind": "case", "device": device, "law": law, "status": SKIP,
                                  "message": f"in the skips file: {about(skip)}"})
                continue
            record = self.judge(device, law, matching(fails, device, law), matching(flakes, device, law))
            if record is None:
                return
            self.results.add(record)
            log(f"{device}: {law}: {record['status']}" + (f": {record['message']}" if record["message"] else ""))
            if record["attempts"][-1]["status"] == HANG:
                self.lose(device, f"the law \"{law}\" hung it: {record['attempts'][-1]['message']}")
            elif record["attempts"][-1]["status"] in (CRASH, TIMEOUT) or " lost: " in record["message"]:
                # A loss not of the law's own doing shows in the device's health.
                bad = self.health([device])
                if bad:
                    self.lose(device, f"after the law \"{law}\" ({record['status']}) its health check failed: "
                                      f"{bad[device]}")

    def judge(self, device, law, expected_fail, known_flake):
        attempts = []
        for attempt in range(1 + self.args.retries):
            # rig conform reports a law past --law-timeout itself; the kill is for a rig that cannot.
            wanted = self.args.law_timeout + max(2, self.args.law_timeout // 4)
            budget = self.budget(wanted)
            if budget is None:
                return None
            status, message, seconds = conform_laws(self.args.rig, device, [law], budget, self.args.out,
                                                    self.args.law_timeout)[law]
            if status == TIMEOUT and budget < wanted:
                self.stop(f"the deadline of {self.args.deadline:.0f} s cut the law \"{law}\" on {device} short: "
                          "it and the rest did not run (--resume continues)")
                return None
            attempts.append({"status": status, "message": message, "seconds": round(seconds, 2)})
            if status not in (FAIL, CRASH, TIMEOUT) or known_flake or expected_fail:
                break  # a pass, a skip, a hang (the device is gone), or an outcome the lists foretell
        final = attempts[-1]
        status, message = final["status"], final["message"]
        if status == PASS and len(attempts) > 1:
            status, message = FLAKE, f"failed ({attempts[0]['status']}: {attempts[0]['message']}), then passed"
        elif known_flake and status in BROKEN and status != HANG:
            status, message = KNOWN_FLAKE, f"{final['status']}: {message} (in the flakes file: {about(known_flake)})"
        elif expected_fail and status in BROKEN:
            status, message = EXPECTED_FAIL, f"{final['status']}: {message} (in the fails file: {about(expected_fail)})"
        elif expected_fail and status == PASS:
            status, message = UNEXPECTED_PASS, (f"passed, but the fails file expects it to fail "
                                                f"({about(expected_fail)}): take it out of the file")
        return {"kind": "case", "device": device, "law": law, "status": status, "message": message,
                "seconds": round(sum(a["seconds"] for a in attempts), 2), "attempts": attempts, "time": now()}

    def bench(self, names, comparing):
        args = self.args
        done = self.results.done_benches()
        for name in names:
            if self.stopped or name in done:
                continue
            blocked = {d: why for d, why in self.lost.items() if args.bench_device in (None, d)}
            if blocked:
                device, why = next(iter(blocked.items()))
                message = f"not run: {device} was lost in this run ({why}); no work goes to a wedged GPU"
                self.results.add({"kind": "figure", "name": name, "bench": name, "status": SKIP, "message": message})
                self.results.add({"kind": "bench", "bench": name, "status": SKIP})
                continue
            command = ["bench", name, "--json"]
            if args.repeats:
                command += ["--repeats", str(args.repeats)]
            if args.bench_device:
                command += ["--device", args.bench_device]
            if comparing:
                command += ["--compare", args.baseline]
            measures, seconds = [], 0.0
            for attempt in range(1 + (args.retries if comparing else 0)):
                budget = self.budget(args.bench_timeout)
                if budget is None:
                    return
                log("rig " + " ".join(command))
                ran = run_rig(args.rig, command, budget)
                seconds += ran.seconds
                if ran.timed_out and budget < args.bench_timeout:
                    self.stop(f"the deadline of {args.deadline:.0f} s cut the bench {name} short (--resume continues)")
                    return
                figures, problem = read_figures(ran, args.bench_timeout)
                measures.append((figures, problem))
                if problem or not any(f.get("regression") for f in figures):
                    break
            self.record_figures(name, measures, comparing, round(seconds, 2))

    def record_figures(self, name, measures, comparing, seconds):
        figures, problem = measures[-1]
        if problem:
            status, message = problem
            self.results.add({"kind": "figure", "name": name, "bench": name, "status": status, "message": message,
                              "seconds": seconds})
            self.results.add({"kind": "bench", "bench": name, "status": status, "seconds": seconds})
            return
        first = {f["name"]: f for f in measures[0][0]}
        for f in figures:
            text = (f"{f.get('value')} {f.get('unit')} (min {f.get('min')}, max {f.get('max')}); floor "
                    f"{f.get('floor')} {f.get('unit')}: {f.get('floor_name')}; {f.get('note')}")
            if comparing:
                text += f"; baseline {f.get('baseline')}"
            status, message = PASS, ""
            if f.get("regression"):
                worse = f.get("worse_by")
                status, message = FAIL, (f"{f['name']}: {f.get('value')} {f.get('unit')} against {f.get('baseline')} "
                                         f"in the baseline, " + (f"{100 * worse:.1f}% worse" if worse is not None
                                                                 else "worse") + f" (more than 10%), on each of "
                                         f"{len(measures)} measures")
            elif first.get(f["name"], {}).get("regression"):
                status, message = FLAKE, (f"{f['name']} regressed ({first[f['name']].get('value')} {f.get('unit')}), "
                                          f"then held on a re-measure ({f.get('value')} {f.get('unit')})")
            self.results.add({"kind": "figure", "name": f["name"], "bench": name, "status": status,
                              "message": message, "text": text, "figure": f, "seconds": seconds})
        self.results.add({"kind": "bench", "bench": name, "status": PASS, "seconds": seconds})


def read_figures(ran, timeout):
    """(figures, None) from rig bench --json, or ([], (status, message)) when it gave none."""
    if ran.timed_out:
        return [], (TIMEOUT, f"rig bench ran past {timeout:.0f} s and was killed")
    if ran.signal:
        return [], (CRASH, f"rig bench died by {ran.signal}: {tail(ran.err, 3)}")
    try:
        figures = json.loads(ran.out)
        if not isinstance(figures, list) or not all(isinstance(f, dict) and "name" in f for f in figures):
            raise ValueError("not an array of figures")
    except ValueError:
        return [], (FAIL, f"rig bench printed no figures (exit {ran.code}): {tail(ran.err or ran.out, 3)}")
    if ran.code not in (0, 1) or (ran.code == 1 and not any(f.get("regression") for f in figures)):
        return [], (FAIL, f"rig bench exited {ran.code}: {tail(ran.err, 3)}")
    return figures, None


# ---------------------------------------------------------------------------------------
# The report.

def summarize(meta, records):
    latest = {}
    for r in records:
        if r.get("kind") == "case":
            latest[(r["device"], r["law"])] = r
    cases = list(latest.values())
    counts = {}
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    conform = []
    for device in dict.fromkeys(c["device"] for c in cases):
        mine = [c for c in cases if c["device"] == device]
        failed = sum(c["status"] in FAILING for c in mine)
        conform.append({"device": device, "tests": len(mine), "failures": failed,
                        "skipped": sum(c["status"] == SKIP for c in mine),
                        "status": "failed" if failed else "passed",
                        "statuses": {s: sum(c["status"] == s for c in mine) for s in {c["status"] for c in mine}}})
    figures = [r for r in records if r.get("kind") == "figure"]
    bench = meta.get("bench")
    if bench is not None:
        bench = dict(bench, figures=[dict(r.get("figure") or {"name": r["name"]}, status=r["status"],
                                          message=r.get("message", ""), seconds=r.get("seconds"))
                                     for r in figures],
                     regressions=[r["name"] for r in figures if r["status"] == FAIL and r.get("figure")])
        bench["status"] = ("regressed" if bench["regressions"] else
                           "error" if any(r["status"] in FAILING for r in figures) else "passed")
    # An earlier run's errors and losses (before --resume) are history: only this run's count.
    starts = [i for i, r in enumerate(records) if r.get("kind") == "run"]
    this_run = records[starts[-1]:] if starts else records
    infra = [r["message"] for r in this_run if r.get("kind") == "infra"]
    failing = [c for c in cases if c["status"] in FAILING] + [r for r in figures if r["status"] in FAILING]
    exit_code = EXIT_INFRA if infra else EXIT_FAILED if failing else EXIT_OK
    benches = {r["bench"]: r for r in records if r.get("kind") == "bench"}
    steps = [{"step": f"{c['device']}: {c['law']}", "seconds": c.get("seconds", 0)} for c in cases] + \
            [{"step": f"bench {name}", "seconds": r.get("seconds", 0)} for name, r in benches.items()]
    slowest = sorted(steps, key=lambda step: -(step["seconds"] or 0))[:10]
    return dict(meta, statuses=counts, cases=cases, conform=conform, bench=bench, slowest=slowest,
                lost=[r for r in this_run if r.get("kind") == "lost"], errors=infra,
                ok=exit_code == EXIT_OK, exit_code=exit_code, updated=now())


def main(argv):
    args = parse_arguments(argv)
    os.makedirs(args.out, exist_ok=True)
    lock = Lock(args.lock)
    try:
        taken = lock.take(args.lock_timeout)
    except OSError as e:
        log(f"cannot take the lock {args.lock}: {e.strerror} (--lock names another file)")
        return EXIT_USAGE
    if not taken:
        log(f"the lock {args.lock} was not free within {args.lock_timeout:.0f} s (held by {lock.holder()})")
        return EXIT_USAGE
    try:
        return run(args, lock)
    except UsageError as e:
        log(str(e))
        return EXIT_USAGE
    finally:
        lock.release()


def run(args, lock):
    try:
        commands = rig_commands(args.rig, 60)
    except OSError as e:
        log(f"cannot run {args.rig} ({e.strerror}): build rig first (meson setup build && ninja -C build), "
            "or pass --rig")
        return EXIT_USAGE
    lists = {what: read_list(path, what) for what, path in
             (("fails", args.fails), ("flakes", args.flakes), ("skips", args.skips))}
    law_patterns(args)  # a caselist that cannot be read is a usage error before anything runs

    if args.resume and not os.path.exists(os.path.join(args.out, "results.jsonl")):
        log(f"--resume: {args.out}/results.jsonl does not exist; starting afresh")
    results = Results(args.out, args.resume)
    uname = os.uname()
    meta = {"host": socket.gethostname(), "started": now(), "rig": args.rig, "build": build_facts(args.rig),
            "kernel": {"sysname": uname.sysname, "release": uname.release, "version": uname.version,
                       "machine": uname.machine},
            "lock": {"file": args.lock, "holder": lock.holder_line}, "expect": args.expect,
            "lists": {"fails": args.fails, "flakes": args.flakes, "skips": args.skips},
            "shard": args.shard and f"{args.shard[0]}/{args.shard[1]}", "fraction": args.fraction,
            "deadline": args.deadline, "devices": [], "bench": None, "warnings": []}
    results.summary = lambda records: summarize(meta, records)
    results.add({"kind": "run", "time": now(), "resumed": args.resume, "argv": sys.argv[1:]})
    state = Run(args, results)

    def infra(step, message):
        log(message)
        results.add({"kind": "infra", "step": step, "message": message, "time": now()})
        return results.summary(results.records)["exit_code"]

    def terminated(signum, frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, terminated)

    try:
        mark = read_unhealthy(args.lock)
        if mark and not args.health_check:
            return infra("health", f"this host was marked unhealthy on {mark.get('since')}: {mark.get('reason')}; "
                                   "it runs nothing until scripts/hwtest.py --health-check passes")
        try:
            devices = find_devices(args.rig, args.timeout)
        except InfraError as e:
            return infra("devices", str(e))
        meta["devices"] = devices
        problems = check_expectation(args.expect, devices)
        if problems is None:
            meta["warnings"].append(f"no expectation at {args.expect}: the devices were not checked")
            log(meta["warnings"][-1])
        elif problems:
            return infra("expectation", "the devices differ from the expectation " + args.expect + ": "
                         + "; ".join(problems))
        names = [d["name"] for d in devices]
        if not names:
            return infra("devices", "rig devices shows no device")
        conform_available = "conform" in commands
        unknown = [d for d in args.device if d not in names]
        if unknown and conform_available:
            # Devices rig devices does not list but the conformance suite opens: a memory
            # device (MEM), the disk device (DISK), the fake driver's (FAKE…).
            listed = run_rig(args.rig, ["conform", "--list"], 60)
            targets = {line.split("\t")[0] for line in listed.out.splitlines() if "\t" in line}
            unknown = [d for d in unknown if d not in targets]
        if unknown:
            return infra("devices", f"no device is named {', '.join(unknown)}; rig devices shows {', '.join(names)}"
                                    " (and rig conform --list names the others it runs)")
        chosen = args.device or names
        checked = chosen if conform_available and "--law" in help_text(args.rig, ["conform"], 60) else []

        if args.health_check and not checked:
            return infra("health", "this rig's conform command runs no single law (it has no --law): "
                                   "no health check is possible; build a newer rig")
        if checked:
            bad = state.health(checked)
            if bad:
                reason = "; ".join(f"{d}: {why}" for d, why in bad.items())
                mark_unhealthy(args.lock, f"the health check failed: {reason}", next(iter(bad)), args.out)
                return infra("health", f"the health check failed: {reason}")
            if args.health_check:
                if mark:
                    os.remove(unhealthy_path(args.lock))
                    log(f"the health check passed: the host's unhealthy mark ({mark.get('reason')}) is cleared")
                else:
                    log("the health check passed")
                return EXIT_OK

        if not args.no_conform:
            if not conform_available:
                message = "this rig has no conform command: the conformance suite did not run"
                log(message)
                status = FAIL if args.require_conform else SKIP
                for device in chosen:
                    results.add({"kind": "case", "device": device, "law": "conformance suite", "status": status,
                                 "message": message})
            elif not checked:
                return infra("conform", "this rig's conform command runs no single law (it has no --law): "
                                        "build a newer rig")
            else:
                cases = []
                for device in chosen:
                    try:
                        cases += [(device, law) for law in list_laws(args.rig, device, args.timeout)]
                    except InfraError as e:
                        return infra("conform", str(e))
                cases = choose(cases, args)
                if not cases:
                    return infra("conform", "no law was chosen to run: the patterns, shard and fraction leave none")
                for device in chosen:
                    state.conform_device(device, [law for d, law in cases if d == device], lists["fails"],
                                         lists["flakes"], lists["skips"])

        if not args.no_bench and not (args.shard and args.shard[0] != 1) and not state.stopped:
            comparing = os.path.exists(args.baseline) and not args.update_baseline
            meta["bench"] = {"baseline": args.baseline, "compared": comparing, "baseline_updated": False}
            if not comparing and not args.update_baseline:
                meta["bench"]["message"] = (f"no baseline at {args.baseline}: figures are not compared "
                                            "(--update-baseline makes one)")
                log(meta["bench"]["message"])
            names = args.bench or bench_names(args.rig, 60)
            if not names:
                return infra("bench", "rig bench --help names no bench")
            state.bench(names, comparing)
            if args.update_baseline and not state.stopped:
                figures = [r["figure"] for r in results.records if r.get("kind") == "figure" and r.get("figure")]
                keep = ("name", "value", "min", "max", "unit", "floor", "floor_name", "ratio", "note")
                os.makedirs(os.path.dirname(os.path.abspath(args.baseline)), exist_ok=True)
                write_atomically(args.baseline, json.dumps([{k: f[k] for k in keep if k in f} for f in figures],
                                                           indent=2) + "\n")
                meta["bench"]["baseline_updated"] = True
                log(f"wrote the baseline {args.baseline}")
    except KeyboardInterrupt as e:
        return infra("interrupted", f"the run was stopped ({e or 'SIGINT'}): the rest did not run "
                                    "(--resume continues)")
    meta["finished"] = now()
    meta["seconds"] = round(time.monotonic() - state.started, 1)
    results.rebuild()
    summary = results.summary(results.records)
    counts = ", ".join(f"{n} {s}" for s, n in sorted(summary["statuses"].items()))
    log(f"{['ok', 'FAILED', 'usage', 'INFRASTRUCTURE ERROR'][summary['exit_code']]}: {counts or 'no law'}; "
        f"reports {args.out}/hwtest.xml, {args.out}/hwtest.json and {args.out}/results.jsonl")
    return summary["exit_code"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
