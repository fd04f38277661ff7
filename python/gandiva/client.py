"""A client for gandivad's API (the same messages as the `gandiva` CLI; see docs/api.md)."""

import json

from . import _gandiva
from .protocol import OperationState


class GandivaError(RuntimeError):
    """An error reply from gandivad, or no daemon to talk to. `code` is the status
    name on the wire (e.g. "not_found", "unavailable", "invalid_argument")."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Client:
    """Talks to one gandivad. endpoint: "ipc:///path" or "tcp://host:port";
    default: $GANDIVA_ENDPOINT or the local socket. A tcp:// endpoint needs
    key (this client's key pair file, `gandiva keygen`) and server_key (the
    daemon's public key, or a file holding it), as the CLI's --key/--server-key."""

    def __init__(self, endpoint=None, timeout_ms=5000, key=None, server_key=None):
        self._api = _gandiva.ApiClient(endpoint or _gandiva.default_endpoint(), timeout_ms)
        if (key is None) != (server_key is None):
            raise ValueError("key and server_key go together")
        if key is not None:
            self._api.use_curve(str(key), str(server_key))

    @property
    def endpoint(self):
        return self._api.endpoint()

    def call(self, request_type, **fields):
        """Sends one request; returns the reply's fields as a dict or raises GandivaError."""
        ok, code, text = self._api.call(request_type, json.dumps(fields))
        if not ok:
            raise GandivaError(code, text)
        return json.loads(text)

    def raw_call(self, data):
        """Sends raw bytes as a request and returns the raw reply text (for tests)."""
        return self._api.raw_call(bytes(data))

    def hello(self):
        return self.call("hello")

    def jobs(self):
        return self.call("list_jobs")["jobs"]

    def job(self, job):
        return self.call("list_jobs", job=job)["jobs"][0]

    def devices(self):
        return self.call("list_devices")["devices"]

    def switches(self, device=None, limit=1000):
        fields = {"limit": limit}
        if device:
            fields["device"] = device
        return self.call("list_switches", **fields)["switches"]

    def suspend(self, job):
        return self.call("suspend", job=job)

    def resume(self, job):
        return self.call("resume", job=job)

    def kill(self, job, signal=15):
        return self.call("kill", job=job, signal=signal)

    def set_slice(self, device, ms):
        return self.call("set_slice", device=device, ms=ms)

    def set_share_mode(self, device, mode, capacity=None, window_ms=None):
        """pack: the device's jobs run at once (up to capacity); slice: they take
        turns; auto: gandivad measures both and keeps the better (docs/api.md)."""
        fields = {"device": device, "mode": str(mode)}
        if capacity is not None:
            fields["capacity"] = int(capacity)
        if window_ms is not None:
            fields["window_ms"] = int(window_ms)
        return self.call("set_share_mode", **fields)

    def set_weight(self, job, weight):
        return self.call("set_weight", job=job, weight=float(weight))

    def assign_device(self, job, device):
        return self.call("assign_device", job=job, device=device)

    def checkpoint(self, job, directory, wait=True, timeout_s=600):
        """Has the job write its state to `directory` at its next boundary; with
        wait, returns the finished operation (raises GandivaError if it failed)."""
        import os
        self.call("checkpoint", job=job, dir=os.path.abspath(directory))
        return self._follow(job, timeout_s) if wait else None

    def migrate(self, job, to, device=None, wait=True, timeout_s=600):
        """Moves the job to peer node `to`; with wait, returns the finished
        operation (downtime_ms, to_job, bytes) or raises GandivaError."""
        fields = {"job": job, "to": to}
        if device:
            fields["device"] = device
        self.call("migrate", **fields)
        return self._follow(job, timeout_s) if wait else None

    def launch(self, command, cwd=None, env=None, **fields):
        """Has gandivad start `command` (a list) itself; returns the reply (job,
        pid, stdout_log, ...). fields: name, device, weight, user, restore,
        memory_limit_bytes. cwd defaults to this process's, env to gandivad's."""
        import os
        fields.update(command=list(command), cwd=os.path.abspath(cwd or os.getcwd()))
        if env is not None:
            fields["env"] = dict(env)
        return self.call("launch", **fields)

    def read_log(self, job, offset=0, stream="stdout"):
        """A launched job's output from absolute `offset`: data, offset,
        next_offset, end_offset, ended."""
        return self.call("read_log", job=job, offset=offset, stream=stream)

    def _follow(self, job, timeout_s):
        import time
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            op = self.job(job).get("operation")
            if op and op["state"] != OperationState.RUNNING:
                if op["state"] == OperationState.FAILED:
                    raise GandivaError("failed", op["error"])
                return op
            time.sleep(0.02)
        raise GandivaError("deadline_exceeded", f"job {job}'s operation did not finish in {timeout_s} s")


class SchedulerClient:
    """Talks to the cluster scheduler (`gandiva scheduler`, docs/scheduler.md).
    endpoint: default $GANDIVA_SCHEDULER or the local scheduler socket; key and
    server_key for its --tcp endpoint, as Client's."""

    def __init__(self, endpoint=None, timeout_ms=5000, key=None, server_key=None):
        self._client = Client(endpoint or _gandiva.default_scheduler_endpoint(), timeout_ms,
                              key=key, server_key=server_key)

    @property
    def endpoint(self):
        return self._client.endpoint

    def call(self, request_type, **fields):
        return self._client.call(request_type, **fields)

    def submit(self, command, cwd=None, env=None, **fields):
        """Queues `command` (a list); returns its job id. fields: name, user, vc,
        kind, gpus, ranks, restartable. cwd defaults to this process's, env to its
        environment (the job runs with it on whichever node the policy picks)."""
        import os
        fields.update(command=list(command), cwd=os.path.abspath(cwd or os.getcwd()),
                      env=dict(os.environ if env is None else env))
        return self.call("submit", **fields)["job"]

    def queue(self, all=False):
        """The scheduler's jobs (sched_job records); ended ones too with all=True."""
        return self.call("queue", all=all)["jobs"]

    def job(self, job):
        return self.call("queue", job=job)["jobs"][0]

    def cancel(self, job):
        return self.call("cancel", job=job)["state"]

    def read_log(self, job, offset=0, stream="stdout"):
        """The output of the job's current run, from its node (as Client.read_log)."""
        return self.call("read_log", job=job, offset=offset, stream=stream)

    def wait(self, job, timeout_s=None, poll_s=0.2):
        """Waits for the job to end; returns its record (state finished, failed or cancelled)."""
        import time
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            record = self.job(job)
            if record["state"] in ("finished", "failed", "cancelled"):
                return record
            if deadline is not None and time.monotonic() > deadline:
                raise GandivaError("deadline_exceeded", f"job {job} did not end in {timeout_s} s")
            time.sleep(poll_s)

