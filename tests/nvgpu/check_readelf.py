#!/usr/bin/env python3
"""Compares the driver's cubin reader (cubin_dump) with `readelf -S -r -W` on each cubin:
every section's index, name, offset and size, and every relocation's table, offset, info and
(RELA) addend must be the same.

usage: check_readelf.py READELF CUBIN_DUMP CUBIN..."""
import re
import subprocess
import sys

SECTION = re.compile(r"^\s*\[\s*(\d+)\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)\s")
TABLE = re.compile(r"^Relocation section '([^']+)'")
RELOC = re.compile(r"^([0-9a-f]{8,})\s+([0-9a-f]{8,})\s.*?(?:([+-]) ([0-9a-f]+))?$")


def readelf(tool, path):
    out = subprocess.run([tool, "-S", "-r", "-W", path], check=True, capture_output=True, text=True).stdout
    lines, table, rela = [], None, False
    for line in out.splitlines():
        m = SECTION.match(line)
        if m and int(m.group(1)) > 0:
            lines.append(f"section {int(m.group(1))} {m.group(2)} {int(m.group(3), 16):x} {int(m.group(4), 16):x}")
            continue
        m = TABLE.match(line)
        if m:
            table = m.group(1)
            rela = table.startswith(".rela")
            continue
        m = RELOC.match(line.strip())
        if table and m:
            entry = f"reloc {table} {int(m.group(1), 16):x} {int(m.group(2), 16):x}"
            if rela:
                addend = int(m.group(4), 16) if m.group(4) else 0
                entry += f" {-addend if m.group(3) == '-' else addend}"
            lines.append(entry)
    return lines


def main():
    tool, dump, cubins = sys.argv[1], sys.argv[2], sys.argv[3:]
    failed = 0
    for path in cubins:
        ours = subprocess.run([dump, path], check=True, capture_output=True, text=True).stdout.splitlines()[1:]
        theirs = readelf(tool, path)
        if sorted(ours) != sorted(theirs):
            failed += 1
            print(f"{path}: the reader and readelf disagree")
            for line in sorted(set(ours) - set(theirs)):
                print(f"  reader only:  {line}")
            for line in sorted(set(theirs) - set(ours)):
                print(f"  readelf only: {line}")
        else:
            print(f"{path}: {len(ours)} sections and relocations agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
