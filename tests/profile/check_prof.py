#!/usr/bin/env python3
"""Checks `rig prof` from the outside, on prof_program (10 launches of prof_short, 3 of
prof_long, a memory device's copy):

- it runs the program with RIG_PROFILE set, and the trace the program wrote follows the
  Chrome Trace Event Format, with slices that nest on each track;
- it prints the launches by total time: prof_long first, with 3 launches, then prof_short
  with 10, each with its mean, p50 and p99;
- --csv writes one row per launch;
- it returns the program's exit status, refuses a program that writes no trace, and one
  that cannot be run.

usage: check_prof.py RIG PROF_PROGRAM"""
import csv
import json
import os
import subprocess
import sys
import tempfile

rig, program = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check, finish  # noqa: E402  (tests/support/checks.py)


def prof(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIG_PROFILE")}
    return subprocess.run([rig, "prof", *args], capture_output=True, text=True, timeout=240, cwd=cwd, env=env)


def trace_problems(trace):
    """Where the trace breaks the Chrome Trace Event Format or rig's nesting (as
    tests/profile/chrome_trace.hpp checks it)."""
    problems = []
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["no traceEvents array"]
    names, threads, tracks = {}, {}, {}
    for i, e in enumerate(trace["traceEvents"]):
        if not isinstance(e, dict) or not isinstance(e.get("ph"), str):
            problems.append(f"event {i} has no ph")
            continue
        for key in ("name",):
            if not isinstance(e.get(key), str):
                problems.append(f"event {i} has no string {key}")
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int):
                problems.append(f"event {i} has no integer {key}")
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"event {i}'s args is not an object")
        if e["ph"] == "M":
            name = e.get("args", {}).get("name")
            if e.get("name") == "process_name":
                names[e["pid"]] = name
            elif e.get("name") == "thread_name":
                threads[(e["pid"], e["tid"])] = name
        elif e["ph"] == "X":
            ts, dur = e.get("ts"), e.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or ts < 0 or dur < 0:
                problems.append(f"event {i} is a slice without a ts and a dur at least 0")
                continue
            start = round(ts * 1000)
            tracks.setdefault((e["pid"], e["tid"]), []).append((start, start + round(dur * 1000), e.get("name")))
    for (pid, tid), slices in tracks.items():
        if pid not in names or (pid, tid) not in threads:
            problems.append(f"track {pid}/{tid} has no name")
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name in slices:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"slice {name} overlaps {stack[-1][2]} on track {pid}/{tid} without nesting")
            stack.append((start, end, name))
    return problems


def summary_rows(stdout):
    """The summary table's rows: {function: (device, launches)}."""
    rows = {}
    lines = stdout.splitlines()
    header = next((i for i, line in enumerate(lines) if line.split()[:2] == ["device", "function"]), None)
    if header is None:
        return rows
    for line in lines[header + 1:]:
        fields = line.split()
        if len(fields) < 3 or not fields[2].isdigit():
            break
        rows[fields[1]] = (fields[0], int(fields[2]))
    return rows


with tempfile.TemporaryDirectory() as tmp:
    # Long paths: a file name must outlive the program's static objects, whatever its length.
    path = os.path.join(tmp, "a-trace-with-a-long-name.json")
    run = prof("-o", path, "--csv", os.path.join(tmp, "launches-with-a-long-name.csv"), "--", program, cwd=tmp)
    check("rig prof exits with the program's status, 0", run.returncode == 0, run.stdout + run.stderr)
    check("the program wrote the trace", os.path.exists(path))
    if os.path.exists(path):
        with open(path) as f:
            trace = json.load(f)
        problems = trace_problems(trace)
        check("the trace follows the Chrome Trace Event Format and its slices nest", not problems, problems[:5])
        launches = [e for e in trace["traceEvents"] if e.get("cat") == "launch"]
        check("the trace has a slice per launch", len(launches) == 13, len(launches))
    rows = summary_rows(run.stdout)
    check("the summary lists both kernels", {"prof_long", "prof_short"} <= set(rows), run.stdout)
    if {"prof_long", "prof_short"} <= set(rows):
        check("the summary counts the launches", rows["prof_long"][1] == 3 and rows["prof_short"][1] == 10, rows)
        check("the summary puts the most time in all first", list(rows)[0] == "prof_long", run.stdout)
        check("the summary names the device", rows["prof_long"][0] == "CPU", rows)
    for column in ("total", "mean", "p50", "p99"):
        check(f"the summary has a {column} column", column in run.stdout, run.stdout)
    csv_path = os.path.join(tmp, "launches-with-a-long-name.csv")
    check("--csv writes the CSV", os.path.exists(csv_path), run.stderr)
    if os.path.exists(csv_path):
        with open(csv_path, newline="") as f:
            table = list(csv.DictReader(f))
        check("the CSV has a row per launch", len(table) == 13, len(table))
        check("the CSV names each launch's function",
              sorted({r["function"] for r in table}) == ["prof_long", "prof_short"], table[:2])

    status = prof("-o", "trace.json", "--", program, "3", cwd=tmp)
    check("rig prof returns the program's exit status", status.returncode == 3, status.stderr)
    check("and still sums up its trace", "prof_long" in status.stdout, status.stdout)

    none = prof("-o", "none.json", "--", sys.executable, "-c", "pass", cwd=tmp)
    check("a program that writes no trace is refused", none.returncode == 1 and "no trace" in none.stderr,
          none.stderr)
    missing = prof("-o", "trace.json", "--", os.path.join(tmp, "no-such-program"), cwd=tmp)
    check("a program that cannot run is refused", missing.returncode == 1 and "cannot run" in missing.stderr,
          missing.stderr)
    empty = prof("-o", "trace.json", cwd=tmp)
    check("no program is refused", empty.returncode != 0, empty.stdout)

finish()
