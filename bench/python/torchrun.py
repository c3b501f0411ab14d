"""python3 -m torch.distributed.run, with the lookup that fails on Python 3.11 fixed.

Debian's torch 1.13 parses --redirects/--tee with Std.from_str, which finds
the flag by iterating over the IntFlag Std; on 3.11 that iteration skips
Std.NONE (value 0), so the default "0" maps to None and the launcher dies
in to_map ('NoneType' object has no attribute 'get'). Std(int) looks the
value up directly. Usage is torchrun's:
    /usr/bin/python3 bench/python/torchrun.py --nproc_per_node 2 script.py ...
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(vm):
    if re.match(api._VALUE_REGEX, vm):
        return api.Std(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): api.Std(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = staticmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (after the fix)

if __name__ == "__main__":
    sys.exit(main())
