"""Shared steps of rig's scripts: install missing Debian packages, configure and build."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What building and testing rig needs from Debian 12.
PACKAGES = [
    "meson", "ninja-build", "g++", "pkg-config", "python3",
    "libfmt-dev", "nlohmann-json3-dev", "libcli11-dev", "doctest-dev", "liburing-dev",
    # The NVIDIA simulator's fatbin reader: nvcc compresses a fatbin's PTX with zstd.
    "libzstd-dev",
    # rig devices: the GPUs on the PCI bus (libpci and its names), their render nodes (libdrm).
    "libpci-dev", "pci.ids", "libdrm-dev",
    # Floors of the benchmarks: OpenCL on PoCL; fio for the disk device.
    "pocl-opencl-icd", "ocl-icd-opencl-dev", "opencl-headers", "fio",
    # AMD: the code-object reader (LLVM), test kernels (clang, lld), and real code objects
    # (librocrand1's for the CDNA interpreter's coverage).
    "llvm-19-dev", "clang-19", "lld-19", "librocsparse0", "librocrand1",
    # Building against the installed rig (examples/), and its Debian packages.
    "cmake", "make", "build-essential", "dpkg-dev", "debhelper", "lintian",
    # Remote devices over UCX (remote/, `rig serve`), and the floors of their benches (ucx_perftest).
    "libucx-dev", "ucx-utils",
    # Agents started by mpirun, as on a cluster (tests/remote/check_mpirun.py).
    "openmpi-bin",
    # The hardware test runner's HTML page, rendered in a real browser by its test.
    "chromium",
    # The VM tests (tests/vm): QEMU under TCG, and busybox for the guest's initramfs. The
    # guest's kernel package is downloaded (apt-get download), never installed.
    "qemu-system-x86", "busybox-static",
    # Buffer::dma's RDMA test in the VM: verbs (libibverbs), rxe's provider, the rdma tool.
    "libibverbs-dev", "ibverbs-providers", "iproute2",
]


def run(*cmd, cwd=ROOT, env=None):
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, cwd=cwd, check=True, env=env)


def missing_packages(packages):
    missing = []
    for name in packages:
        probe = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name],
                               capture_output=True, text=True)
        if "install ok installed" not in probe.stdout:
            missing.append(name)
    return missing


def install(packages=PACKAGES):
    missing = missing_packages(packages)
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(*sudo, "apt-get", "update", "-qq", env=env)
    run(*sudo, "apt-get", "install", "-y", "-qq", *missing, env=env)


def build(directory, *options, targets=()):
    """Configures `directory` (once) with `options`, then builds `targets` (all by default)."""
    path = os.path.join(ROOT, directory)
    if not os.path.exists(os.path.join(path, "build.ninja")):
        shutil.rmtree(path, ignore_errors=True)  # a setup that failed half-way
        run("meson", "setup", directory, *options)
    run("ninja", "-C", directory, *targets)
    return path


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def cpus():
    return str(max(1, os.cpu_count() or 1))


__all__ = ["ROOT", "PACKAGES", "run", "install", "build", "fail", "cpus", "shutil"]
