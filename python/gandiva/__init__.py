"""gandiva: let training jobs share GPUs by time-slicing them at iteration boundaries.

Mark one boundary per training iteration and a gandiva node controller can
suspend, resume and time-slice the job exactly between iterations::

    import gandiva
    for batch in data:
        train_step(batch)
        gandiva.step()

or, for PyTorch, ``gandiva.torch.attach(optimizer)`` marks a boundary after every
``optimizer.step()``. Run the script with ``gandiva run -- python train.py``.

Registered state (``register_state``, or ``gandiva.torch.register`` for a model,
an optimizer and anything else with a ``state_dict()``, a
``gandiva.torch.resumable`` DataLoader included) makes the job checkpointable
and migratable: a process started
with GANDIVA_RESTORE=DIR (``gandiva run --restore DIR``) loads it at its first
boundary and continues exactly. See docs/checkpoint.md.

Importing this package changes nothing. Without a controller (a plain
``python train.py``) every call is a cheap no-op apart from measuring iteration
times, and the job says once on stderr that it runs unmanaged.
"""

import contextlib
import os

from . import _gandiva
from . import protocol
from .client import Client, GandivaError, SchedulerClient

__all__ = ["step", "managed", "job_id", "stats", "iteration", "register_state",
           "register_buffer", "unregister_state", "checkpoint", "Client", "SchedulerClient",
           "GandivaError", "protocol"]


def step():
    """Marks an iteration boundary: records the iteration time and, if the
    controller asked this job to suspend, parks here until it is resumed."""
    _gandiva.boundary()


def managed():
    """True while a gandiva controller manages this process."""
    return _gandiva.managed()


def job_id():
    """The job id the controller gave this process (0 when unmanaged)."""
    return _gandiva.job_id()


def stats():
    """This job's iteration profile: iterations, mean/ewma/p50/p99 ms, iterations/s, parks."""
    return _gandiva.iteration_stats()


@contextlib.contextmanager
def iteration():
    """Context manager: the block is one iteration; a boundary is marked when it ends.

        for batch in data:
            with gandiva.iteration():
                train_step(batch)
    """
    try:
        yield
    finally:
        _gandiva.boundary()


def register_state(name, save, load):
    """Registers a checkpoint section: ``save()`` returns its bytes (bytes,
    bytearray or memoryview, or a list of them, written in order from where
    they lie), ``load(data)`` gets them back, as bytes, in a
    restoring process. Register before the first boundary: a process started
    with GANDIVA_RESTORE=DIR loads its checkpoint there. Sections are saved in
    registration order; the functions run on the thread marking the boundary
    (or calling checkpoint()), with the GIL held. Raises KeyError if the name
    is taken."""
    _gandiva.register_state(name, save, load)


def register_buffer(name, buffer):
    """Registers writable, C-contiguous memory (a bytearray, a NumPy array, a
    CPU tensor's ``.numpy()``) as a checkpoint section: saved from it and
    restored into it, with no functions to write. A restored section of
    another size fails the restore. A migration's arriving state is received
    straight into this memory. The object stays exported (a bytearray cannot
    be resized) until ``unregister_state(name)``; do not change it while the
    job is parked. Raises KeyError if the name is taken, ValueError for empty
    memory, TypeError/BufferError for an object without such memory."""
    _gandiva.register_buffer(name, buffer)


def unregister_state(name):
    """Removes a registered section; KeyError if there is none of that name."""
    _gandiva.unregister_state(name)


def checkpoint(dir):
    """Writes every registered section to DIR/state.gdck now (DIR is created;
    the file appears atomically). Call it where the state is consistent, e.g.
    right after an optimizer step. Returns the bytes written; raises
    GandivaError if nothing is registered (failed_precondition: there would be
    nothing to restore), a save function failed or the file cannot be written."""
    ok, code, message, nbytes = _gandiva.checkpoint(os.fspath(dir))
    if not ok:
        raise GandivaError(code, message)
    return nbytes
