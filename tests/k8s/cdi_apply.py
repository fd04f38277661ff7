"""What a container runtime does with a CDI spec, as far as these tests need it:
the edits of the named devices (the spec's own, then each device's) merged
into one environment, mounts and device nodes. A later variable of the same
name replaces an earlier one, as the CDI library's edits do."""


def edits_for(spec, names):
    """names: fully qualified ("gandiva.io/gpu=0") device names of spec's kind."""
    devices = {d["name"]: d for d in spec["devices"]}
    chosen = []
    for full in names:
        kind, _, name = full.partition("=")
        assert kind == spec["kind"], f"{full} is not of kind {spec['kind']}"
        assert name in devices, f"the spec has no device {name}"
        chosen.append(devices[name].get("containerEdits", {}))
    env, mounts, nodes = {}, [], []
    for edits in [spec.get("containerEdits", {})] + chosen:
        for var in edits.get("env", []):
            key, _, value = var.partition("=")
            env[key] = value
        mounts += edits.get("mounts", [])
        nodes += edits.get("deviceNodes", [])
    return env, mounts, nodes


def host_path_of(mounts, container_path):
    """The host path under which container_path lies, through the spec's
    mounts (for a job started on the host as the container would see it)."""
    best = None
    for m in mounts:
        c = m["containerPath"].rstrip("/")
        if container_path == c or container_path.startswith(c + "/"):
            if best is None or len(c) > len(best[0]):
                best = (c, m["hostPath"])
    assert best, f"{container_path} is not under any mount of the spec"
    return best[1] + container_path[len(best[0]):]
