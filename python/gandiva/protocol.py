"""The enums of gandivad's wire protocol (protocol/include/gandiva/protocol/messages.def)
as Python string enums, and the reply validator: compare with ``JobState.RUNNING``,
not with "running". A test checks these lists against the schema's."""

import enum
import json

from . import _gandiva


class WireEnum(str, enum.Enum):
    """A str enum whose members are their wire strings, in comparisons, hashing,
    str(), f-strings and json.dumps alike."""

    __str__ = str.__str__
    __format__ = str.__format__


class JobState(WireEnum):
    STARTING = "starting"  # no boundary yet
    RUNNING = "running"
    SUSPENDING = "suspending"  # asked to park, not at a boundary yet
    SUSPENDED = "suspended"  # parked
    DETACHED = "detached"  # left gandiva's runtime; its process still runs
    EXITED = "exited"
    FAILED = "failed"  # exited without detaching, or a non-zero exit code
    MIGRATED = "migrated"  # moved to another node; its operation says where

    @property
    def ended(self):
        """Over on this node: it will not run here again."""
        return self in (JobState.EXITED, JobState.FAILED, JobState.MIGRATED)


class OperationKind(WireEnum):
    CHECKPOINT = "checkpoint"
    MIGRATE = "migrate"


class OperationState(WireEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class BoundarySource(WireEnum):
    NONE = "none"
    EXPLICIT = "explicit"  # the job marks them (gandiva.step, gd_boundary)
    INFERRED = "inferred"  # the shim infers them from the job's GPU calls


class SwapState(WireEnum):
    RESIDENT = "resident"
    SWAPPED_OUT = "swapped_out"
    SWAP_FAILED = "swap_failed"


class DeviceKind(WireEnum):
    GPU = "gpu"
    CPU = "cpu"


class ExitReason(WireEnum):
    NONE = "none"
    EXITED = "exited"
    KILLED = "killed"
    FAILED_TO_START = "failed_to_start"
    LOST = "lost"
    MIGRATED = "migrated"


class ShareMode(WireEnum):
    SLICE = "slice"  # the device's jobs take turns (time slicing)
    PACK = "pack"  # up to capacity run at once
    AUTO = "auto"  # both measured on the current jobs; the better kept


class SchedJobState(WireEnum):
    VALIDATING = "validating"  # its first iterations, before it queues
    QUEUED = "queued"
    STARTING = "starting"  # being launched on its node
    RUNNING = "running"
    SUSPENDED = "suspended"  # parked on its node by the policy
    FINISHED = "finished"  # exit code 0
    FAILED = "failed"
    CANCELLED = "cancelled"


class MigrateStartState(WireEnum):
    RUNNING = "running"
    QUEUED = "queued"


# By their names in the schema (and docs/api.md).
ENUMS = {
    "job_state": JobState,
    "operation_kind": OperationKind,
    "operation_state": OperationState,
    "boundary_source": BoundarySource,
    "swap_state": SwapState,
    "device_kind": DeviceKind,
    "share_mode": ShareMode,
    "migrate_start_state": MigrateStartState,
    "exit_reason": ExitReason,
    "sched_job_state": SchedJobState,
}

PROTOCOL_VERSION = _gandiva.protocol_version()


class ReplyError(ValueError):
    """A reply that does not match its schema in messages.def."""


def validate_reply(request_type, reply, allow_unknown=False):
    """Checks an ok reply (a dict, as Client.call returns it) against the schema of
    `request_type`'s reply: fields, types, records, enum values. Raises ReplyError,
    which says what and where; allow_unknown lets fields the schema does not name pass."""
    ok, message = _gandiva.validate_reply(request_type, json.dumps(reply), allow_unknown)
    if not ok:
        raise ReplyError(message)


def validate_reply_frame(request_type, frame):
    """The same for a raw reply frame (Client.raw_call), envelope included."""
    ok, message = _gandiva.validate_reply_frame(request_type, frame)
    if not ok:
        raise ReplyError(message)
