"""What the Python benches share: the jobs' environment (their default thread
settings, as users run them) and a gandivad started on a private endpoint."""
import os
import subprocess
import time

# Variables that change how a job's thread pools size themselves or spin: left
# out, so each job runs with the settings its libraries choose by default.
THREAD_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                   "OPENBLAS_THREAD_TIMEOUT", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")


def job_env(build, endpoint):
    """This process's environment for gandivad and the jobs: the endpoint, the
    built Python package, no thread settings."""
    env = dict(os.environ, GANDIVA_ENDPOINT=endpoint, PYTHONPATH=os.path.join(build, "python"))
    for var in THREAD_SETTINGS:
        env.pop(var, None)
    return env


def start_gandivad(argv, log_path, env, ready, timeout_s=15):
    """Starts gandivad (argv) with its output in log_path and returns the Popen
    once ready() is true (an exception from it counts as not yet). RuntimeError
    if gandivad exits or is not ready within timeout_s."""
    with open(log_path, "w") as log:  # gandivad keeps its own copy of the fd
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if ready():
                return proc
        except Exception:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"gandivad did not come up; see {log_path}")
        time.sleep(0.05)
