#!/usr/bin/env python3
"""isa_coverage.py — how much of the machine code in AMD code objects the CDNA interpreter
(tests/sim/amd/gfx9.hpp) decodes.

Each FILE is a code object (an AMDGPU ELF) or a host library with a .hip_fatbin section of
clang offload bundles, whose gfx90a and gfx942 code objects are taken. Every code object is
disassembled by `llvm-objdump-19 -d --mcpu=PROCESSOR`; each instruction's dwords go to the
gfx9_mnemonics program (built from gfx9_decode.cpp's `mnemonic`), which names it as llvm-objdump
does or refuses it. Per processor the tool prints the distinct mnemonics, how many of them the
interpreter decodes, the same for instruction counts, and the mnemonics it refuses, most
frequent first. With --require P it fails (exit status 1) when, for some processor, the
interpreter decodes less than P percent of the instructions. With --skip-missing a FILE that
does not exist makes it exit with status 77 (a skip to meson) instead of failing.

usage: isa_coverage.py --mnemonics PATH [--objdump PROGRAM] [--top N] [--require P] [--skip-missing] FILE...
"""
import argparse
import collections
import os
import struct
import subprocess
import sys
import tempfile

# ELF e_flags EF_AMDGPU_MACH values (llvm/include/llvm/BinaryFormat/ELF.h).
MACHINES = {0x3F: "gfx90a", 0x4C: "gfx942"}
EF_AMDGPU_MACH_MASK = 0xFF
EM_AMDGPU = 224
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
# llvm-objdump pads the code with these after s_endpgm; they are never run.
PADDING = {"s_code_end"}
SKIPPED = 77  # the exit status meson counts as a skip


def elf_sections(data):
    """The sections of a 64-bit little-endian ELF: {name: (offset, size)}."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return {}
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + k * shentsize) for k in range(shnum)]
    strings_at = headers[shstrndx][4]
    out = {}
    for h in headers:
        end = data.index(b"\0", strings_at + h[0])
        out[data[strings_at + h[0]:end].decode()] = (h[4], h[5])
    return out


def processor_of(code_object):
    """The processor an AMDGPU code object is for, or None for others."""
    if len(code_object) < 0x34 or code_object[:4] != b"\x7fELF":
        return None
    machine, = struct.unpack_from("<H", code_object, 0x12)
    flags, = struct.unpack_from("<I", code_object, 0x30)
    if machine != EM_AMDGPU:
        return None
    return MACHINES.get(flags & EF_AMDGPU_MACH_MASK)


def bundled_code_objects(data, start, end):
    """The code objects in the clang offload bundles between start and end."""
    at = start
    while True:
        found = data.find(BUNDLE_MAGIC, at, end)
        if found < 0:
            return
        p = found + len(BUNDLE_MAGIC)
        count, = struct.unpack_from("<Q", data, p)
        p += 8
        bundle_end = p
        for _ in range(count):
            offset, size, triple_size = struct.unpack_from("<QQQ", data, p)
            p += 24 + triple_size
            bundle_end = max(bundle_end, found + offset + size)
            if size:
                yield data[found + offset:found + offset + size]
        at = max(bundle_end, p)


def code_objects(path):
    """(processor, bytes) for each gfx90a or gfx942 code object in the file at path."""
    with open(path, "rb") as f:
        data = f.read()
    if processor_of(data):
        yield processor_of(data), data
        return
    fatbin = elf_sections(data).get(".hip_fatbin")
    if not fatbin:
        return
    for co in bundled_code_objects(data, fatbin[0], fatbin[0] + fatbin[1]):
        if processor_of(co):
            yield processor_of(co), co


def listing(objdump, processor, code_object, scratch):
    """(mnemonic, dwords) for each instruction llvm-objdump lists."""
    path = os.path.join(scratch, "code.co")
    with open(path, "wb") as f:
        f.write(code_object)
    text = subprocess.run([objdump, "-d", f"--mcpu={processor}", path], check=True, capture_output=True,
                          text=True).stdout
    for line in text.splitlines():
        if not line.startswith("\t") or "// " not in line:
            continue
        head, _, tail = line.rpartition("// ")
        parts = head.split()
        if not parts or ": " not in tail:
            continue
        words = [w for w in tail.split(": ", 1)[1].split() if len(w) == 8]
        if words:
            yield parts[0], words


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mnemonics", required=True, help="the gfx9_mnemonics program")
    parser.add_argument("--objdump", default="llvm-objdump-19")
    parser.add_argument("--top", type=int, default=25, help="how many refused mnemonics to list")
    parser.add_argument("--require", type=float, help="the least percentage of instructions decoded")
    parser.add_argument("--skip-missing", action="store_true", help="exit 77 (a skip) when a FILE is absent")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    missing = [path for path in args.files if not os.path.exists(path)]
    if missing and args.skip_missing:
        print("isa_coverage: skipped: no " + " ".join(missing))
        sys.exit(SKIPPED)

    # Per processor: instructions per mnemonic, and the mnemonics the interpreter decodes.
    counts = collections.defaultdict(collections.Counter)
    decoded = collections.defaultdict(set)
    objects = collections.Counter()
    with tempfile.TemporaryDirectory() as scratch:
        for path in args.files:
            for processor, co in code_objects(path):
                objects[processor] += 1
                listed = [(m, w) for m, w in listing(args.objdump, processor, co, scratch) if m not in PADDING]
                query = "".join(f"{processor} {' '.join(w)}\n" for _, w in listed)
                answers = subprocess.run([args.mnemonics], input=query, check=True, capture_output=True,
                                         text=True).stdout.splitlines()
                if len(answers) != len(listed):
                    sys.exit(f"isa_coverage: {args.mnemonics} answered {len(answers)} lines for {len(listed)}")
                for (m, _), answer in zip(listed, answers):
                    counts[processor][m] += 1
                    if answer == m:
                        decoded[processor].add(m)
    if not objects:
        sys.exit("isa_coverage: no gfx90a or gfx942 code object in " + " ".join(args.files))
    short = []
    for processor in sorted(counts):
        c = counts[processor]
        known = decoded[processor]
        total = sum(c.values())
        covered = sum(n for m, n in c.items() if m in known)
        print(f"{processor}: {objects[processor]} code objects, {len(c)} distinct mnemonics, "
              f"{len(known)} decoded ({100 * len(known) / len(c):.1f}%); {total} instructions, "
              f"{covered} decoded ({100 * covered / total:.1f}%)")
        if args.require is not None and 100 * covered / total < args.require:
            short.append(f"{processor} {100 * covered / total:.1f}%")
        refused = [(n, m) for m, n in c.items() if m not in known]
        refused.sort(key=lambda x: (-x[0], x[1]))
        if refused:
            print(f"  refused, most frequent first: " +
                  ", ".join(f"{m} ({n})" for n, m in refused[:args.top]) +
                  (f", and {len(refused) - args.top} more" if len(refused) > args.top else ""))

    if short:
        sys.exit(f"isa_coverage: below the {args.require}% required: " + ", ".join(short))


if __name__ == "__main__":
    main()
