"""gandiva: let training jobs share GPUs by time-slicing them at iteration boundaries.

Mark one boundary per training iteration and a gandiva node controller can
suspend, resume and time-slice the job exactly between iterations::

    import gandiva
    for batch in data:
        train_step(batch)
        gandiva.step()

or, for PyTorch, ``gandiva.torch.attach(optimizer)`` marks a boundary after every
``optimizer.step()``. Run the script with ``gandiva run -- python train.py``.

Importing this package changes nothing. Without a controller (a plain
``python train.py``) every call is a cheap no-op apart from measuring iteration
times, and the job says once on stderr that it runs unmanaged.
"""

import contextlib

from . import _gandiva
from .client import Client, GandivaError

__all__ = ["step", "managed", "job_id", "stats", "iteration", "Client", "GandivaError"]


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
