"""Configuration of a fast process group: fast_torch.Options fields, else FAST_TORCH_* variables,
else the defaults. Every value is checked here, with errors that name the field or variable."""

import math
import os
from dataclasses import dataclass, fields
from typing import Mapping, Optional


def _integer(text: str, where: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{where} must be an integer, got {text!r}") from None
    if value < 0:
        raise ValueError(f"{where} must be 0 (one server per host) or a positive count, got {value}")
    return value


def _number(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be finite and non-negative, got {text}")
    return value


def _choice(*names: str):
    def parse(text: str, where: str) -> str:
        if text not in names:
            raise ValueError(f"{where} must be one of {', '.join(names)}, got {text!r}")
        return text
    return parse


# field -> (parser, default); the variable is FAST_TORCH_<FIELD>. None: the preset's figure.
_FIELDS = {
    "gpus_per_server": (_integer, "0"),
    "scheduler": (_choice("automatic", "fast", "direct"), "automatic"),
    "flow": (_choice("rendezvous", "credits"), "rendezvous"),
    "preset": (_choice("h200", "mi300x"), "h200"),
    "scale_up_gbps": (_number, None),
    "scale_out_gbps": (_number, None),
    "alpha_up_us": (_number, None),
    "alpha_out_us": (_number, None),
    "fallback": (_choice("gloo", "none"), "gloo"),
}


def variable(field: str) -> str:
    """The environment variable of an Options field: FAST_TORCH_<FIELD>."""
    return "FAST_TORCH_" + field.upper()


@dataclass
class Options:
    """pg_options of dist.new_group(backend="fast", pg_options=...) and
    dist.init_process_group(backend="fast", pg_options=...). Unset fields (None) come from the
    variable FAST_TORCH_<FIELD>, else from the default. Every rank must pass the same values.

    gpus_per_server  ranks per server; 0: the ranks sharing a host form a server (default 0)
    scheduler        automatic (per call, FAST or direct, whichever the cost model predicts
                     faster), fast (FAST plans) or direct (everything at once, like MPI)
                     (default automatic)
    flow             rendezvous or credits: how receivers pace senders (default rendezvous)
    preset           h200 or mi300x: the fabric figures below unless given (default h200)
    scale_up_gbps, scale_out_gbps, alpha_up_us, alpha_out_us
                     the fabric the planner plans for, per GPU (GB/s, microseconds)
    fallback         gloo: other collectives run on an inner gloo group; none: they raise
                     (default gloo)
    """

    gpus_per_server: Optional[int] = None
    scheduler: Optional[str] = None
    flow: Optional[str] = None
    preset: Optional[str] = None
    scale_up_gbps: Optional[float] = None
    scale_out_gbps: Optional[float] = None
    alpha_up_us: Optional[float] = None
    alpha_out_us: Optional[float] = None
    fallback: Optional[str] = None

    def resolve(self, environ: Mapping[str, str] = os.environ, presets=None) -> dict:
        """Every field's value, checked: the field, else its variable, else the default; the
        fabric figures default to the preset's (`presets(name)` gives them)."""
        out = {}
        for f in fields(self):
            parse, default = _FIELDS[f.name]
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = parse(str(value), f"Options.{f.name}")
            elif variable(f.name) in environ:
                out[f.name] = parse(environ[variable(f.name)].strip(), variable(f.name))
            elif default is not None:
                out[f.name] = parse(default, "the default")
        if presets is not None:
            for name, figure in presets(out["preset"]).items():
                out.setdefault(name, figure)
        for name in ("scale_up_gbps", "scale_out_gbps"):
            if name in out and out[name] <= 0:
                raise ValueError(f"{name} must be positive, got {out[name]} "
                                 f"(Options.{name} or {variable(name)})")
        return out
