"""fast_torch: FAST All-to-All(v) as a torch.distributed backend named "fast".

    import fast_torch                                   # registers the backend
    group = torch.distributed.new_group(backend="fast") # the one-line change
    torch.distributed.all_to_all_single(out, inp, out_splits, in_splits, group=group)

The backend is a c10d::Backend of PyTorch 2, registered for CPU and CUDA tensors.
all_to_all_single and all_to_all run on the fast executor (FAST plans over UCX), bootstrapped
over the group's c10d store; other collectives run on an inner gloo group (Options.fallback).
See docs/pytorch.md.
"""

import torch
import torch.distributed as dist

from .options import Options, variable

try:
    from . import _C
except ImportError as e:  # the source tree, or a build without the extension
    raise ImportError(
        "fast_torch's extension (fast_torch/_C) is missing or does not load: build the project with meson "
        "(it builds fast_torch when -Dtorch_python imports PyTorch 2.15 or later) and put <build>/python on "
        f"PYTHONPATH, or meson install it into this Python's environment ({e})") from e

__all__ = ["DEVICES", "Options", "describe", "variable"]

# The prefix of the inner gloo group's keys in the group's store.
_FALLBACK_PREFIX = "fast_fallback_gloo"


# The devices whose tensors the backend takes: PyTorch routes a group's calls by tensor device.
DEVICES = ("cpu", "cuda")


def _create(backend_options, pg_options):
    """The creator that torch.distributed calls (extended API) once per group of this backend,
    for all of DEVICES."""
    options = pg_options if pg_options is not None else Options()
    if not isinstance(options, Options):
        raise TypeError(f"pg_options of the fast backend must be fast_torch.Options, got {type(options).__name__}")
    s = options.resolve(presets=_C.preset)
    store = backend_options.store
    rank, size = backend_options.group_rank, backend_options.group_size
    timeout = backend_options.timeout
    fallback = None
    if s["fallback"] == "gloo":
        fallback = dist.ProcessGroupGloo(dist.PrefixStore(_FALLBACK_PREFIX, store), rank, size, timeout)
    return _C.create(store, rank, size, timeout, fallback, s["gpus_per_server"], s["scheduler"], s["flow"],
                     s["scale_up_gbps"], s["scale_out_gbps"], s["alpha_up_us"], s["alpha_out_us"],
                     "hip" if torch.version.hip else "cuda")


def describe(group) -> dict:
    """This rank's view of a fast group: servers, gpus_per_server, and the executor's counters
    (operations, failures, plans_made, plans_reused, last_plan_steps, scratch_bytes)."""
    return _C.describe(group._get_backend(torch.device("cpu")))


if "FAST" not in dist.Backend._plugins:  # a second import of this package registers nothing
    dist.Backend.register_backend("fast", _create, extended_api=True, devices=list(DEVICES))
