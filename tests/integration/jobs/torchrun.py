#!/usr/bin/env python3
"""torchrun, as /usr/bin/torchrun runs it, with one fix: Debian's torch 1.13
under Python 3.11 fails to parse its own --redirects/--tee defaults
(Std.from_str compares a plain Enum member with an int and returns None, then
the agent crashes in to_map). Everything else is the real elastic launcher:
it starts one process per rank with RANK/LOCAL_RANK/WORLD_SIZE/MASTER_* set,
and tears the others down when one fails.

usage: torchrun.py [torchrun flags] SCRIPT [ARGS...]
"""

import re
import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed import run


def _from_str(cls, vm):
    if re.fullmatch(r"\d", vm):
        return cls(int(vm))
    return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}


api.Std.from_str = classmethod(_from_str)

if __name__ == "__main__":
    sys.exit(run.main())
