"""Several gandivad nodes on one machine for migration tests: each its own node
name, Unix socket and CURVE-authenticated TCP port; keys made with `gandiva keygen`.
Optionally each in its own network namespace (ip netns + veth)."""

import os
import shutil
import socket
import subprocess
import threading
import time

import conftest
from conftest import GANDIVA, GANDIVAD, BUILD


def wait_for(predicate, timeout=60, what="condition"):
    """conftest.wait_for, with a minute by default: migrations take longer than most waits."""
    return conftest.wait_for(predicate, timeout, what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(keydir, name):
    subprocess.run([GANDIVA, "keygen", "--out", str(keydir), "--name", name], check=True,
                   capture_output=True)
    return keydir / f"{name}.key", (keydir / f"{name}.pub").read_text().strip()


class Node:
    def __init__(self, root, name, address="127.0.0.1", netns=None, extra=()):
        self.name = name
        self.dir = root / name
        self.dir.mkdir()
        self.address = address
        self.port = free_port()
        self.netns = netns
        self.endpoint = f"ipc://{self.dir}/gd.sock"
        self.tcp = f"tcp://{address}:{self.port}"
        self.key, self.public = keygen(root / "keys", name)
        self.extra = list(extra)
        self.proc = None
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint, OMP_NUM_THREADS="1",
                        PYTHONPATH=os.path.join(BUILD, "python"))

    def start(self, authorized, peers, peer_keys=()):
        """authorized: operators' public keys; peer_keys: other nodes' (--peer-keys),
        which may only migrate jobs here."""
        (self.dir / "authorized").write_text("\n".join(authorized) + "\n")
        (self.dir / "peers").write_text("".join(f"{n} {ep} {pub}\n" for n, ep, pub in peers))
        cmd = [GANDIVAD, "--node", self.name, "--devices", "cpu:1", "--endpoint", self.endpoint,
               "--tcp", self.tcp, "--key", str(self.key), "--authorized-keys", str(self.dir / "authorized"),
               "--peers", str(self.dir / "peers"), "--peer-timeout-ms", "3000", *self.extra]
        if peer_keys:
            (self.dir / "peer-keys").write_text("".join(f"{k} peer-{i}\n" for i, k in enumerate(peer_keys)))
            cmd += ["--peer-keys", str(self.dir / "peer-keys")]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        self.log = open(self.dir / "gandivad.log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not (self.dir / "gd.sock").exists():
            assert self.proc.poll() is None, self.read_log()
            assert time.monotonic() < deadline
            time.sleep(0.02)

    def read_log(self):
        return (self.dir / "gandivad.log").read_text()

    def cli(self, *args, check=True, timeout=120):
        r = subprocess.run([GANDIVA, *args], env=self.env, capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"gandiva {' '.join(args)} on {self.name}: {r.stderr}\n{self.read_log()}"
        return r

    def jobs(self):
        import json
        return json.loads(self.cli("ps", "--all", "--json").stdout)

    def first_iterations(self):
        """The first job's iterations (0 while there is none), in one CLI call:
        a test polling it to act mid-run must see the count as it is, not two
        process starts late (each is slow on a loaded machine)."""
        jobs = self.jobs()
        return jobs[0]["iterations"] if jobs else 0

    def job(self, job_id):
        """The job's record, or {} while it is not registered yet."""
        return next((j for j in self.jobs() if j["id"] == job_id), {})

    def run(self, *cmd, name="job"):
        return subprocess.Popen([GANDIVA, "run", "--name", name, "--", *cmd], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def stop(self, sig=15):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc:
            self.log.close()


class Proxy:
    """A TCP forwarder between two nodes that a test can cut."""

    def __init__(self, target_port):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.target = target_port
        self.sockets = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                a, _ = self.listener.accept()
            except OSError:
                return
            b = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src, dst):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass

    def cut(self):
        self.closed = True
        # shutdown wakes the accept() blocked in the other thread; close alone would not.
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()
        for s in self.sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


def netns_available():
    if shutil.which("ip") is None or os.geteuid() != 0:
        return False
    # A name of this process's own: with a fixed one, a second suite probing at
    # the same moment finds the name taken and skips its netns tests.
    probe = f"gd-probe-{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if r.returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return True


def make_netns_pair(tag):
    """Two namespaces joined by a veth pair: 10.77.x.1 and 10.77.x.2."""
    # "gdp": apart from NetnsLan's gd-<tag>-<name> namespaces and gd<tag><name> links.
    a, b = f"gdp-{tag}-a", f"gdp-{tag}-b"
    sub = 77
    cmds = [
        ["ip", "netns", "add", a], ["ip", "netns", "add", b],
        ["ip", "link", "add", f"gdp{tag}a", "type", "veth", "peer", "name", f"gdp{tag}b"],
        ["ip", "link", "set", f"gdp{tag}a", "netns", a], ["ip", "link", "set", f"gdp{tag}b", "netns", b],
        ["ip", "-n", a, "addr", "add", f"10.{sub}.0.1/24", "dev", f"gdp{tag}a"],
        ["ip", "-n", b, "addr", "add", f"10.{sub}.0.2/24", "dev", f"gdp{tag}b"],
        ["ip", "-n", a, "link", "set", f"gdp{tag}a", "up"], ["ip", "-n", b, "link", "set", f"gdp{tag}b", "up"],
        ["ip", "-n", a, "link", "set", "lo", "up"], ["ip", "-n", b, "link", "set", "lo", "up"],
    ]
    for c in cmds:
        subprocess.run(c, check=True, capture_output=True)
    return (a, f"10.{sub}.0.1"), (b, f"10.{sub}.0.2")


def delete_netns(*names):
    for n in names:
        subprocess.run(["ip", "netns", "del", n], capture_output=True)


class NetnsLan:
    """A namespace per node, all on one bridge in the host's namespace (a
    small LAN, 10.78.<tag>.0/24: node i at .i+1, the host at .254), so a
    process on the host (the scheduler) reaches every node over TCP and the
    nodes reach each other, while each node's jobs live in its namespace."""

    def __init__(self, names, tag=None):
        """tag: where the search for a free tag starts (default: this process's
        pid). Two suites may run on one machine: creating the bridge claims a
        tag (it fails if another LAN holds it), and a taken tag is skipped."""
        self.spaces = {}
        self._claim(os.getpid() if tag is None else int(tag))
        subnet = f"10.78.{self.tag}"
        try:
            self._ip("addr", "add", f"{subnet}.254/24", "dev", self.bridge)
            self._ip("link", "set", self.bridge, "up")
            for i, name in enumerate(names):
                ns, inner, outer = f"gd-{self.tag}-{name}", f"gd{self.tag}{name}", f"gd{self.tag}{name}p"
                self._ip("netns", "add", ns)
                self.spaces[name] = (ns, f"{subnet}.{i + 1}")
                self._ip("link", "add", inner, "type", "veth", "peer", "name", outer)
                self._ip("link", "set", inner, "netns", ns)
                self._ip("link", "set", outer, "master", self.bridge)
                self._ip("link", "set", outer, "up")
                self._ip("-n", ns, "addr", "add", f"{subnet}.{i + 1}/24", "dev", inner)
                self._ip("-n", ns, "link", "set", inner, "up")
                self._ip("-n", ns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError:
            self.delete()
            raise

    def _claim(self, start):
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        for i in range(250):
            tag = (start + i) % 250
            if f"gd-{tag}-" in spaces:  # namespaces left by a LAN that was never deleted
                continue
            if subprocess.run(["ip", "link", "add", f"gdbr{tag}", "type", "bridge"],
                              capture_output=True).returncode == 0:
                self.tag, self.bridge = tag, f"gdbr{tag}"
                return
        raise RuntimeError("no free NetnsLan tag (250 bridges gdbrN taken?)")

    @staticmethod
    def _ip(*args):
        subprocess.run(["ip", *args], check=True, capture_output=True)

    def delete(self):
        for ns, _ in self.spaces.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)
