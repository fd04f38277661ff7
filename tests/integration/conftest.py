"""Fixtures for integration tests: a real gandivad on a private socket, and
helpers to run real training jobs under `gandiva run`."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

BUILD = os.environ.get("GANDIVA_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
GANDIVA = os.path.join(BUILD, "cli", "gandiva")
GANDIVAD = os.path.join(BUILD, "node", "gandivad")
PYTHON = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
INTERVAL_JOB = os.path.join(HERE, "jobs", "interval_job.py")
CNN_EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "train_cnn.py")
MLP_EXAMPLE = os.path.join(BUILD, "examples", "train_mlp")
FINETUNE_EXAMPLE = os.path.join(HERE, "..", "..", "examples", "pytorch", "finetune_frozen.py")
SYNTHETIC_JOB = os.path.join(BUILD, "bench", "migration", "synthetic_state_job")

sys.path.insert(0, os.path.join(BUILD, "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyhelpers"))
from polling import wait_for  # noqa: E402,F401  (the suites' one poll loop)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "native_job: moves only a C++ job (no PyTorch), so a sanitized gandivad, job "
        "and bulk channel run at a sanitized C++ program's speed; make test-asan runs these "
        "(scripts/test_sanitized.sh)")


def pids_running(text):
    """Pids of the processes (but this one) whose command line contains text,
    like `pgrep -f`; read from /proc, as procps tools hang under a preloaded
    ASan runtime (make test-asan)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if text in cmdline:
            pids.append(int(entry))
    return pids


class Daemon:
    """A gandivad process with its own endpoint; stopped at the end of the test."""

    def __init__(self, tmp_path, *flags):
        self.endpoint = f"ipc://{tmp_path}/gd.sock"
        self.log_path = tmp_path / "gandivad.log"
        self.env = dict(os.environ, GANDIVA_ENDPOINT=self.endpoint, OMP_NUM_THREADS="1")
        self.env["PYTHONPATH"] = os.path.join(BUILD, "python")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([GANDIVAD, "--endpoint", self.endpoint, *flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not os.path.exists(f"{tmp_path}/gd.sock"):
            assert self.proc.poll() is None, self.read_log()
            assert time.monotonic() < deadline, "gandivad did not come up"
            time.sleep(0.02)

    def read_log(self):
        return self.log_path.read_text()

    def cli(self, *args, check=True, timeout=30):
        r = subprocess.run([GANDIVA, *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if check:
            assert r.returncode == 0, f"gandiva {' '.join(args)}: {r.stderr}"
        return r

    def cli_json(self, *args):
        return json.loads(self.cli(*args, "--json").stdout)

    def run(self, *cmd, name=None, device=None, weight=None):
        """Starts `gandiva run ... -- cmd`; returns the Popen."""
        args = [GANDIVA, "run"]
        if name:
            args += ["--name", name]
        if device:
            args += ["--device", device]
        if weight:
            args += ["--weight", str(weight)]
        return subprocess.Popen(args + ["--", *cmd], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def jobs(self):
        return {j["name"]: j for j in self.cli_json("ps", "--all")}

    def wait_for(self, predicate, timeout=30, what="condition"):
        return wait_for(predicate, timeout, what, log=self.read_log)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def daemon_factory(tmp_path):
    daemons = []

    def make(*flags):
        d = Daemon(tmp_path, *flags)
        daemons.append(d)
        return d

    yield make
    for d in daemons:
        d.stop()


def read_result(path):
    with open(path) as f:
        return json.load(f)
