#!/usr/bin/env python3
"""Runs test programs inside a QEMU VM on a real Linux kernel with an emulated Intel IOMMU.

    run_vm.py [--kernel 6.12|6.1] [--cache DIR] [--timeout S] PROGRAM...

It takes Debian's kernel package with `apt-get download` and `dpkg -x` into a cache outside
the tree (never installing it on this machine), builds an initramfs of busybox, the kernel's
vfio-pci modules and the programs (statically linked; a dynamic one with the shared libraries
it loads), and boots it with qemu-system-x86_64 under TCG (KVM on these machines cannot run an unmodified guest) on a q35
machine with `intel-iommu` (interrupt remapping, caching mode) and QEMU's `edu` device behind
a PCIe root port, so that vfio-pci can reset it with a secondary bus reset. The guest binds
edu to vfio-pci, runs each program (a doctest program) as root and prints its exit status on the serial console,
which this script reads. It exits with the worst status, 77 (a skip, for meson) with the
reason where QEMU, busybox or the kernel package cannot be had, and 1 where the VM gives no
result before the timeout.
"""
import argparse
import glob
import lzma
import os
import re
import selectors
import shutil
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77

# The kernel packages: the metapackage whose dependency names the versioned image package.
# Debian 12's 6.12 kernel comes from bookworm-security (or bookworm-backports); its 6.1
# kernel is the release's own.
KERNELS = {"6.12": "linux-image-6.12-amd64", "6.1": "linux-image-amd64"}

# The modules to load: vfio-pci and the type1 IOMMU backend of its container, which nothing
# depends on (the rest, the Intel IOMMU included, is built into Debian's kernels); each
# module's own dependencies are found in it.
MODULES = ["vfio_iommu_type1", "vfio-pci"]
# And for Buffer::dma's RDMA test: the NIC's driver and soft RoCE over it, with the verbs
# device files (ib_uverbs) and the crc32 hash rxe's packets carry (rxe asks the crypto API
# for "crc32", which Debian builds as a module nothing names as a dependency: without it
# rdma link add fails with ENOENT). udmabuf is built into the 6.12 kernel.
RDMA_MODULES = ["virtio_net", "ib_uverbs", "crc32_generic", "rdma_rxe"]

# What a verbs program that loads libibverbs needs besides the libraries ldd lists:
# libibverbs loads the provider the configuration names (rxe's, for rdma_rxe); a static one
# has the provider built in. The rdma tool makes the rxe0 link.
VERBS_FILES = ["/etc/libibverbs.d/rxe.driver", "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"]
RDMA_TOOL = "/usr/bin/rdma"

# Programs that need the 6.12 kernel: its built-in udmabuf (6.1 has none). Where the boot
# takes 6.1 they are left out, saying so.
NEEDS_6_12 = {"test_dma"}

EDU_VENDOR, EDU_DEVICE = "0x1234", "0x11e8"


def skip(reason):
    print(f"vm: skipped: {reason}", flush=True)
    sys.exit(SKIP)


def default_cache():
    if os.environ.get("RIG_VM_CACHE"):
        return os.environ["RIG_VM_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "rig", "vm")


def image_package(series):
    """The versioned image package the metapackage of `series` depends on, or None."""
    meta = KERNELS[series]
    probe = subprocess.run(["apt-cache", "depends", meta], capture_output=True, text=True)
    for line in probe.stdout.splitlines():
        m = re.match(r"\s*Depends:\s*(linux-image-\S+)", line)
        if m and not m.group(1).endswith("-dbg"):
            return m.group(1)
    return None


def kernel_tree(series, cache):
    """The folder holding the extracted kernel package of `series` (boot/vmlinuz-*,
    lib/modules/*): the newest one `cache` holds, else the one apt names now, downloaded into
    `cache` (empty the cache to take a newer kernel); with None, or None and why not."""
    os.makedirs(cache, exist_ok=True)
    prefix = "linux-image-6.12" if series == "6.12" else "linux-image-6.1."
    cached = sorted(d for d in glob.glob(os.path.join(cache, prefix + "*"))
                    if glob.glob(os.path.join(d, "boot", "vmlinuz-*")))
    if cached:
        return cached[-1], None
    package = image_package(series) if shutil.which("apt-cache") else None
    if package is None:
        return None, f"apt knows no {KERNELS[series]} (its suite is not in the apt sources) and {cache} holds none"
    tree = os.path.join(cache, package)
    if glob.glob(os.path.join(tree, "boot", "vmlinuz-*")):
        return tree, None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache) as work:
        got = subprocess.run(["apt-get", "download", package], cwd=work, capture_output=True, text=True)
        debs = glob.glob(os.path.join(work, "*.deb"))
        if got.returncode != 0 or not debs:
            return None, f"cannot download {package}: {got.stderr.strip() or got.stdout.strip()}"
        size = os.path.getsize(debs[0])
        unpacked = os.path.join(work, "tree")
        subprocess.run(["dpkg-deb", "-x", debs[0], unpacked], check=True)
        os.rename(unpacked, tree)
    print(f"vm: downloaded {package} ({size / 1e6:.0f} MB) in {time.monotonic() - started:.1f} s into {tree}",
          flush=True)
    return tree, None


def module_bytes(path):
    data = open(path, "rb").read()
    return lzma.decompress(data) if path.endswith(".xz") else data


def module_files(tree, rdma):
    """The kernel version and the modules to load, as (name, bytes), each after those it
    depends on (the "depends=" of its .modinfo: the package has no modules.dep, which depmod
    writes when a kernel is installed)."""
    versions = os.listdir(os.path.join(tree, "lib", "modules"))
    if len(versions) != 1:
        sys.exit(f"vm: {tree}/lib/modules holds {versions}, not one kernel")
    version = versions[0]
    by_name = {}
    for folder, _, files in os.walk(os.path.join(tree, "lib", "modules", version, "kernel")):
        for f in files:
            if ".ko" in f:
                by_name[f.split(".ko")[0].replace("-", "_")] = os.path.join(folder, f)
    order, loaded = [], set()

    def visit(name):
        if name in loaded:
            return
        loaded.add(name)
        path = by_name.get(name)
        if path is None:
            sys.exit(f"vm: the kernel {version} has no {name} module")
        data = module_bytes(path)
        m = re.search(rb"(?:^|\0)depends=([^\0]*)\0", data)
        for dep in (m.group(1).decode().split(",") if m else []):
            if dep:
                visit(dep.replace("-", "_"))
        order.append((os.path.basename(path).split(".ko")[0] + ".ko", data))

    for module in MODULES + (RDMA_MODULES if rdma else []):
        visit(module.replace("-", "_"))
    return version, order


def shared_libraries(program):
    """The shared libraries `program` loads and its loader, as absolute paths (none for a
    static program)."""
    out = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


def without_debug_info(program):
    """The program's bytes without its debug sections (strip, where binutils has it): less
    for the guest's kernel to unpack."""
    strip = shutil.which("strip")
    if not strip:
        return open(program, "rb").read()
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "stripped")
        subprocess.run([strip, "--strip-debug", "-o", out, program], check=True)
        return open(out, "rb").read()


class Cpio:
    """An initramfs: a cpio archive in the kernel's "newc" format, uncompressed."""

    def __init__(self, path):
        self.out = open(path, "wb")
        self.inode = 1
        self.seen = set()

    def _entry(self, name, mode, data=b"", target=None):
        body = target.encode() if target is not None else data
        name_bytes = name.encode() + b"\0"
        fields = [self.inode, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(name_bytes), 0]
        self.inode += 1
        header = b"070701" + b"".join(b"%08x" % v for v in fields)
        self.out.write(header + name_bytes)
        self.out.write(b"\0" * (-(len(header) + len(name_bytes)) % 4))
        self.out.write(body)
        self.out.write(b"\0" * (-len(body) % 4))

    def folder(self, name):
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self.seen:
                self.seen.add(sub)
                self._entry(sub, stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o755):
        name = name.strip("/")
        if "/" in name:
            self.folder(os.path.dirname(name))
        if name in self.seen:
            return
        self.seen.add(name)
        self._entry(name, stat.S_IFREG | mode, data)

    def host_file(self, path, name=None):
        """Copies `path` in at `name` (its own path by default), following a link."""
        with open(path, "rb") as f:
            self.file(name or path, f.read(), 0o755)

    def close(self):
        self._entry("TRAILER!!!", 0)
        self.out.close()


def init_script(programs, modules, env, rdma):
    lines = [
        "#!/bin/busybox sh",
        "/bin/busybox mkdir -p /proc /sys /dev /tmp",
        "/bin/busybox mount -t proc proc /proc",
        "/bin/busybox mount -t sysfs sys /sys",
        "/bin/busybox mount -t devtmpfs dev /dev",
        "export PATH=/bin",
        "/bin/busybox --install -s /bin",
        "echo RIG-VM-BOOTED",
    ] + [f"export {name}='{value}'" for name, value in env]
    for m in modules:
        lines.append(f"insmod /lib/vm-modules/{m} || echo 'RIG-VM-NOTE insmod {m} failed'")
    if rdma:
        # Soft RoCE over the NIC: the link up with an address (rxe's GIDs are its addresses).
        lines += [
            "ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 || echo 'RIG-VM-NOTE eth0 did not come up'",
            "rdma link add rxe0 type rxe netdev eth0 && echo 'RIG-VM-NOTE rxe0 over eth0' "
            "|| echo 'RIG-VM-NOTE rdma link add rxe0 failed'",
        ]
    lines += [
        "edu=''",
        "for d in /sys/bus/pci/devices/*; do",
        f"  if [ \"$(cat $d/vendor)\" = {EDU_VENDOR} ] && [ \"$(cat $d/device)\" = {EDU_DEVICE} ]; then edu=$(basename $d); fi",
        "done",
        "if [ -n \"$edu\" ]; then",
        "  echo vfio-pci > /sys/bus/pci/devices/$edu/driver_override",
        "  echo $edu > /sys/bus/pci/drivers_probe",
        "  echo \"RIG-VM-NOTE edu at $edu bound to $(basename $(readlink /sys/bus/pci/devices/$edu/driver))\"",
        "else",
        "  echo 'RIG-VM-NOTE no edu device on the bus'",
        "fi",
        "worst=0",
    ]
    for p in programs:
        name = os.path.basename(p)
        lines += [
            f"/bin/{name} --no-colors",
            "rc=$?",
            f"echo \"RIG-VM-RESULT {name} $rc\"",
            "[ $rc -gt $worst ] && worst=$rc",
        ]
    lines += ["echo \"RIG-VM-EXIT $worst\"", "poweroff -f"]
    return ("\n".join(lines) + "\n").encode()


def uses_verbs(program):
    """Whether `program` runs RDMA verbs (then the VM gets a NIC and soft RoCE): it loads
    libibverbs, or, linked statically, holds it (its symbol ibv_get_device_list)."""
    if any("libibverbs" in os.path.basename(lib) for lib in shared_libraries(program)):
        return True
    with open(program, "rb") as f:
        return b"ibv_get_device_list" in f.read()


def build_initramfs(path, programs, tree, env):
    # A static verbs program has its provider built in; one that loads libibverbs needs the
    # provider's library and the file naming it.
    verbs = [p for p in programs if uses_verbs(p)]
    provider_files = VERBS_FILES if any(shared_libraries(p) for p in verbs) else []
    rdma = bool(verbs) and all(os.path.exists(f) for f in provider_files + [RDMA_TOOL])
    version, modules = module_files(tree, rdma)
    archive = Cpio(path)
    busybox = shutil.which("busybox") or "/bin/busybox"
    if not os.path.exists(busybox):
        skip("busybox is missing: apt-get install busybox-static")
    archive.host_file(busybox, "bin/busybox")
    for lib in shared_libraries(busybox):
        archive.host_file(lib)
    for program in programs:
        archive.file("bin/" + os.path.basename(program), without_debug_info(program))
        for lib in shared_libraries(program):
            archive.host_file(lib)
    if rdma:
        for f in provider_files + [RDMA_TOOL]:
            archive.host_file(f)
            for lib in shared_libraries(f) if not f.endswith(".driver") else []:
                archive.host_file(lib)
        archive.host_file(RDMA_TOOL, "bin/rdma")
    names = []
    for name, data in modules:
        archive.file("lib/vm-modules/" + name, data, 0o644)
        names.append(name)
    archive.file("init", init_script(programs, names, env, rdma))
    archive.close()
    return version, rdma


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=sorted(KERNELS), default="6.12")
    parser.add_argument("--cache", default=default_cache())
    parser.add_argument("--timeout", type=float, default=150)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set in the guest for the programs (RIG_CONFORMANCE_SCALE=0.2)")
    parser.add_argument("programs", nargs="+")
    args = parser.parse_args()

    qemu = shutil.which("qemu-system-x86_64")
    if not qemu:
        skip("qemu-system-x86_64 is missing: apt-get install qemu-system-x86")
    series = args.kernel
    tree, why = kernel_tree(series, args.cache)
    if tree is None and series == "6.12":
        # The tests of vfio/ and edu run on 6.1 too (docs/vfio.md); the release's own kernel is
        # always there.
        print(f"vm: {why}; taking the 6.1 kernel instead", flush=True)
        series = "6.1"
        tree, why = kernel_tree(series, args.cache)
    if tree is None:
        skip(why)
    if series != "6.12":
        left = [p for p in args.programs if os.path.basename(p) in NEEDS_6_12]
        for p in left:
            print(f"vm: {os.path.basename(p)} is left out: it needs the 6.12 kernel's udmabuf", flush=True)
        args.programs = [p for p in args.programs if p not in left]
    kernels = glob.glob(os.path.join(tree, "boot", "vmlinuz-*"))
    if not kernels:
        skip(f"{tree} holds no boot/vmlinuz-*")

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        initramfs = os.path.join(work, "initramfs.cpio")
        env = [tuple(e.split("=", 1)) for e in args.env if "=" in e and "'" not in e]
        version, rdma = build_initramfs(initramfs, [os.path.abspath(p) for p in args.programs], tree, env)
        built = time.monotonic()
        print(f"vm: initramfs for {version}: {os.path.getsize(initramfs) / 1e6:.1f} MB in {built - started:.1f} s",
              flush=True)
        command = [
            qemu, "-machine", "q35,kernel-irqchip=split,accel=tcg", "-cpu", "max", "-icount", "shift=0,sleep=off", "-smp", "1", "-m", "1024",
            "-device", "intel-iommu,intremap=on,caching-mode=on",
            "-device", "pcie-root-port,id=edu_port,chassis=1", "-device", "edu,bus=edu_port",
            *(["-nic", "user,model=virtio-net-pci"] if rdma else ["-nic", "none"]), "-display", "none", "-vga", "none", "-serial", "stdio", "-monitor", "none",
            "-no-reboot", "-kernel", kernels[0], "-initrd", initramfs,
            "-append", "console=ttyS0 intel_iommu=on quiet panic=-1",
        ]
        vm = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = built + args.timeout
        result, tail, pending = None, [], b""
        selector = selectors.DefaultSelector()
        selector.register(vm.stdout, selectors.EVENT_READ)
        while result is None and time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(vm.stdout.fileno(), 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").rstrip("\r")
                print(line, flush=True)
                tail = (tail + [line])[-40:]
                m = re.match(r"RIG-VM-EXIT (\d+)", line)
                if m:
                    result = int(m.group(1))
        try:
            vm.wait(timeout=10)
        except subprocess.TimeoutExpired:
            vm.kill()
            vm.wait()
        done = time.monotonic()
        if result is None:
            why = "the VM exited" if vm.returncode is not None and done < deadline else f"no result in {args.timeout:.0f} s"
            print(f"vm: {why} (QEMU status {vm.returncode}); the console's last lines are above", file=sys.stderr)
            sys.exit(1)
        print(f"vm: boot to result {done - built:.1f} s, {done - started:.1f} s in all; worst status {result}",
              flush=True)
        sys.exit(result)


if __name__ == "__main__":
    main()
