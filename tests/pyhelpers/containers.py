"""Commands in real containers for the tests, started by runc (an OCI runtime).

What worked on this machine (Debian 12, hybrid cgroups v1 + v2, root), and is
what this helper does (docs/containers.md):

- runc 1.1.5 with a bundle whose rootfs is an empty directory into which the
  host's /usr, /etc, /var, /opt, /home, /root and /work are bound read-only (and
  /bin, /lib, ... as the links Debian has): there is no image and no registry to
  pull one from. runc runs with its cgroupfs driver (a cgroup per controller in
  the v1 hierarchies). Its default /sys mount (a fresh sysfs) fails without a
  network namespace ("device or resource busy"), so /sys is the host's, bound
  read-only, and the container shares the host's network (a Unix socket is all a
  job needs to reach gandivad).
- crun 1.8.1 refuses to run at all here ("cgroups in hybrid mode not
  supported"), with --cgroup-manager=disabled too. podman was not tried (it
  needs an image).

Each container has its own pid, IPC, UTS and mount namespaces, a private
/dev/shm and /tmp (tmpfs), and the host paths the test names bound in.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time

RUNC = shutil.which("runc")

# Host directories every container sees, read-only: the jobs' Python with torch
# (/usr), the build and the tests (/work here; CHECKOUT and BUILD_TREE wherever a
# clone is, as CI's may be under /tmp, which a container has of its own), and
# what programs read in /etc.
CHECKOUT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD_TREE = os.path.realpath(os.environ.get("GANDIVA_BUILD_DIR", os.path.join(CHECKOUT, "build")))
_BASE_DIRS = ("/usr", "/etc", "/var", "/opt", "/home", "/root", "/work")
HOST_DIRS = _BASE_DIRS + tuple(
    d for d in dict.fromkeys((CHECKOUT, BUILD_TREE))
    if not any(d == b or d.startswith(b + "/") for b in _BASE_DIRS))
HOST_LINKS = ("bin", "sbin", "lib", "lib32", "lib64")

_counter = 0
_problem = None


def _mount(destination, source, options, kind="bind"):
    return {"destination": destination, "type": kind, "source": source, "options": options}


def _spec(rootfs, args, env, cwd, uid, gid, mounts, hostname):
    base = [
        _mount("/proc", "proc", [], "proc"),
        _mount("/dev", "tmpfs", ["nosuid", "strictatime", "mode=755", "size=65536k"], "tmpfs"),
        _mount("/dev/pts", "devpts",
               ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"], "devpts"),
        # The container's own /dev/shm: a control block in the host's is not seen here.
        _mount("/dev/shm", "shm", ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
               "tmpfs"),
        _mount("/dev/mqueue", "mqueue", ["nosuid", "noexec", "nodev"], "mqueue"),
        _mount("/sys", "/sys", ["rbind", "nosuid", "noexec", "nodev", "ro"]),
        _mount("/tmp", "tmpfs", ["nosuid", "nodev", "mode=1777"], "tmpfs"),
    ]
    for d in HOST_DIRS:
        if os.path.isdir(d) and not os.path.islink(d):
            base.append(_mount(d, d, ["rbind", "ro"]))
    for host, inside, writable in mounts:
        base.append(_mount(inside, host, ["rbind", "rw" if writable else "ro"]))
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid},
            "args": list(args),
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": cwd,
            # runc's default set, as `runc spec` writes it: root in here is no host root.
            "capabilities": {k: ["CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_AUDIT_WRITE"]
                             for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": True,
        },
        "root": {"path": rootfs, "readonly": False},
        "hostname": hostname,
        "mounts": base,
        "linux": {
            # No network namespace (the host's network; see the module's docstring).
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list"],
            "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger"],
        },
    }


class Container:
    """One command in one runc container, running until it exits or is killed.

    mounts: (host path, path inside, writable) triples. env: the command's whole
    environment. stdout/stderr: files (or subprocess constants) for its output."""

    def __init__(self, args, *, mounts=(), env=None, cwd="/", uid=0, gid=0, name="c",
                 stdout=None, stderr=None):
        global _counter
        assert RUNC, "runc is not installed"
        _counter += 1
        self.id = f"gd-test-{os.getpid()}-{_counter}-{name}"
        self.bundle = tempfile.mkdtemp(prefix="gd-bundle-")
        rootfs = os.path.join(self.bundle, "rootfs")
        os.mkdir(rootfs)
        for link in HOST_LINKS:
            if os.path.islink("/" + link):
                os.symlink(os.readlink("/" + link), os.path.join(rootfs, link))
        spec = _spec(rootfs, args, env if env is not None else {"PATH": "/usr/bin:/bin"}, cwd,
                     uid, gid, mounts, name)
        with open(os.path.join(self.bundle, "config.json"), "w") as f:
            json.dump(spec, f)
        # runc stays in the foreground as the container's parent: its exit is the
        # container's (a command killed by a signal: 128 + N).
        self.proc = subprocess.Popen([RUNC, "run", "--bundle", self.bundle, self.id],
                                     stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        self._deleted = False

    def host_pid(self):
        """The host pid of the container's first process, or None."""
        r = subprocess.run([RUNC, "state", self.id], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        pid = json.loads(r.stdout).get("pid", 0)
        return pid or None

    def wait(self, timeout=None):
        return self.proc.wait(timeout=timeout)

    def kill(self, signal="KILL"):
        """Signals the container's first process; KILL ends the whole container
        (the kernel kills every process of a pid namespace whose first one dies)."""
        subprocess.run([RUNC, "kill", self.id, signal], capture_output=True)

    def remove(self):
        if self._deleted:
            return
        self._deleted = True
        if self.proc.poll() is None:
            self.kill()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        subprocess.run([RUNC, "delete", "--force", self.id], capture_output=True)
        shutil.rmtree(self.bundle, ignore_errors=True)


def runtime_problem():
    """None if a container can run here; else why not (for a test's skip). Tried
    once per process: a container that runs /usr/bin/true must exit 0."""
    global _problem
    if _problem is not None:
        return _problem or None
    if os.geteuid() != 0:
        _problem = "containers need root here (runc without a user namespace)"
    elif not RUNC:
        _problem = "runc is not installed (apt-get install runc)"
    else:
        c = Container(["/usr/bin/true"], name="probe", stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
        try:
            out, err = c.proc.communicate(timeout=30)
            _problem = "" if c.proc.returncode == 0 else \
                f"runc cannot start a container here: {err.decode(errors='replace').strip()}"
        except subprocess.TimeoutExpired:
            _problem = "runc did not start a container within 30 s"
        finally:
            c.remove()
    return _problem or None


def wait_gone(container, timeout=20):
    deadline = time.monotonic() + timeout
    while container.proc.poll() is None:
        assert time.monotonic() < deadline, f"container {container.id} did not end"
        time.sleep(0.05)
