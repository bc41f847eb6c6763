#!/usr/bin/env python3
"""Two "hosts" on this machine: network namespaces of this run's own, joined by a veth pair
with addresses of their own. An agent serves in one (rig serve on 10.201.N.1); a client in
the other runs conformance laws on its memory device over TCP (10.201.N.2), then both are
torn down. Skips (77) where this process may not make namespaces (not root, no ip).

usage: check_netns.py RIG_TOOL"""
import os
import shutil
import subprocess
import sys
import time

SKIP = 77


def ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True)


def main():
    tool = os.path.abspath(sys.argv[1])
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("skip: making network namespaces needs root and ip (iproute2)")
        return SKIP
    n = os.getpid() % 250 + 1
    server_ns, client_ns = f"rig-agent-{os.getpid()}", f"rig-client-{os.getpid()}"
    veth_a, veth_b = f"rigA{os.getpid() % 100000}", f"rigB{os.getpid() % 100000}"
    agent_address, client_address = f"10.201.{n}.1", f"10.201.{n}.2"
    made = []
    agent = None
    try:
        for ns in (server_ns, client_ns):
            if ip("netns", "add", ns, check=False).returncode != 0:
                print(f"skip: cannot make network namespace {ns}")
                return SKIP
            made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        ip("link", "add", veth_a, "netns", server_ns, "type", "veth", "peer", "name", veth_b, "netns", client_ns)
        ip("-n", server_ns, "addr", "add", f"{agent_address}/24", "dev", veth_a)
        ip("-n", client_ns, "addr", "add", f"{client_address}/24", "dev", veth_b)
        ip("-n", server_ns, "link", "set", veth_a, "up")
        ip("-n", client_ns, "link", "set", veth_b, "up")
        env = dict(os.environ, RIG_TOKEN="netns-test-token", UCX_TLS="tcp")
        agent = subprocess.Popen(["ip", "netns", "exec", server_ns, tool, "serve", "--listen", f"{agent_address}:0",
                                  "--devices", "MEM"], stdout=subprocess.PIPE, text=True, env=env)
        line = agent.stdout.readline().strip()
        if not line.startswith("listening "):
            print(f"FAIL: the agent printed {line!r}, not its address")
            return 1
        address = line.split()[1]
        # The link takes a moment to carry: until then a connection fails at once.
        client_env = dict(env, RIG_REMOTE=address)
        until = time.monotonic() + 10
        while True:
            seen = subprocess.run(["ip", "netns", "exec", client_ns, tool, "devices"], env=client_env,
                                  capture_output=True, text=True, timeout=30)
            if f"MEM@{agent_address}" in seen.stdout:
                break
            if time.monotonic() > until:
                print(f"FAIL: the client saw no MEM@{agent_address} within 10 s: {seen.stderr.strip()}")
                return 1
            time.sleep(0.1)
        client = subprocess.run(["ip", "netns", "exec", client_ns, tool, "conform", "--device", f"MEM@{agent_address}",
                                 "--law", "copies are the identity*", "--law", "a reader sees the last writer"],
                                env=client_env, capture_output=True, text=True, timeout=60)
        print(client.stdout, client.stderr)
        if client.returncode != 0 or "2 passed, 0 failed" not in client.stdout:
            print("FAIL: the laws did not pass on the agent in the other namespace")
            return 1
        print(f"ok: MEM@{agent_address} served across network namespaces over veth")
        return 0
    finally:
        if agent:
            agent.kill()
            agent.wait()
        for ns in made:
            ip("netns", "del", ns, check=False)


if __name__ == "__main__":
    sys.exit(main())
