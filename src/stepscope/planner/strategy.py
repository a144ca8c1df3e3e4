"""A training strategy as data: the parallel layout, schedule, micro-batching, recompute policy,
offload and the framework's overlap mechanisms of one configuration (``--evaluate``, ``--baseline``,
a ``--batch`` record's ``strategy``), parsed from its text once (:meth:`Strategy.parse`) and
completed from the framework configuration where the text states nothing (:meth:`Strategy.under`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConfigError
from .config import FrameworkConfig
from .recompute import RECOMPUTE
from .vocab import SCHEDULES, TP_OVERLAP, tp_overlap_needs_sp

KEY_ALIASES = {
    "fsdp": "zero",
    "zero_stage": "zero",
    "micro_batch": "mb",
    "grad_accum": "ga",
    "gas": "ga",
    "remat": "recompute",
    "schedule": "sched",
    "expert_tp": "etp",
    "shard_group": "hsdp",
    "async_tp": "tp_overlap",
    "tp_comm_overlap": "tp_overlap",
    "reshard_after_forward": "reshard",
    "sequence_parallel": "sp",
    "cpu_offloading_num_layers": "offload_layers",
}
# other names of recompute policies: Megatron's --recompute-modules layernorm (layernorm_moe_act on a
# dense model); MaxText's "minimal_flash" (decoders.py: deprecated, the same policy as
# minimal_with_context) and the short names of MaxText remat policies in users' tables
RECOMPUTE_ALIASES = {
    "layernorm": "layernorm_moe_act",
    "minimal_flash": "minimal_with_context",
    "minimal_with_ctx": "minimal_with_context",
    "save_dot_ctx_ex_mlp": "save_dot_with_context_except_mlp",
    "save_dot_with_ctx_except_mlp": "save_dot_with_context_except_mlp",
}
_SCHEDULE_NAMES = {
    "interleaved": "1f1b",
    "zbh1": "zb-h1",
    "zbv": "zb-v",
    "zero-bubble": "zb-h1",
    "gpipe": "afab",
    "dualpipe-v": "dualpipev",
    "dualpipe_v": "dualpipev",
}


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """One configuration by its fields' codes (names are indices: ``recompute`` into RECOMPUTE,
    ``sched`` into SCHEDULES, ``tp_overlap`` into TP_OVERLAP); 0 for ``etp`` (= tp), ``hsdp`` (one
    shard group) and ``ga`` (derived from the batch) means "derived". ``given``: the fields the text
    stated (the framework's defaults fill only the others); ``layernorm``: the text named Megatron's
    ``recompute=layernorm`` (a dense model's layernorm_moe_act)."""

    tp: int = 1
    sp: int = 1
    pp: int = 1
    vpp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int = 0
    zero: int = 0
    hsdp: int = 0
    sched: int = 0
    mb: int = 1
    ga: int = 0
    recompute: int = 0
    offload: int = 0
    offload_layers: int = 0
    tp_overlap: int = 0
    ep_overlap: int = 0
    keep_params: int = 0
    given: frozenset[str] = field(default=frozenset(), compare=False)
    layernorm: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def parse(cls, text: str) -> Strategy:
        """``"tp=8,pp=8,dp=16,vpp=2,mb=1,recompute=selective"`` -> the strategy (parse_strategy
        says what each key takes); a field given twice, an unknown key or a bad value is a
        ConfigError naming it."""
        vals: dict[str, Any] = {}
        given: dict[str, str] = {}
        layernorm = False
        for part in filter(None, (p.strip() for p in text.split(","))):
            if "=" not in part:
                raise ConfigError(f"bad strategy item {part!r}", fix="use key=value pairs, e.g. tp=8,pp=2,dp=4")
            k, v = (x.strip().lower() for x in part.split("=", 1))
            name, code = parse_value(k, v, part)
            if name in given:
                raise ConfigError(f"the strategy sets {name} twice ({given[name]}, {part})", fix="keep one of them")
            if code > 2**31:
                raise ConfigError(f"strategy {part} is beyond any device count", fix=f"e.g. {k}=8")
            given[name] = part
            vals[name] = code
            layernorm = layernorm or (name == "recompute" and "_".join(v.replace("-", " ").split()) == "layernorm")
        if vals.get("offload_layers", 0) > 0:
            vals["offload"] = 1  # offloading some layers is offloading
        return cls(**vals, given=frozenset(given), layernorm=layernorm)

    def under(self, config: FrameworkConfig) -> Strategy:
        """The strategy with the framework's overlap mechanisms and sequence parallelism where it
        states none of its own: tp_overlap, ep_overlap=1, sp=0 (sequence_parallel false)."""
        defaults = {
            "tp_overlap": TP_OVERLAP.index(config.tp.overlap),
            "ep_overlap": int(config.moe.ep_overlap),
            "sp": int(config.tp.sequence_parallel),
        }
        changes: dict[str, Any] = {k: v for k, v in defaults.items() if k not in self.given and v != getattr(self, k)}
        return dataclasses.replace(self, **changes) if changes else self

    def arrays(self) -> dict[str, np.ndarray]:
        """The strategy as one-element arrays, the cost model's input (FIELDS order)."""
        return {k: np.array([getattr(self, k)]) for k in FIELDS}


def _check(v: Strategy) -> None:
    """The fields' ranges and the combinations no framework runs."""
    for k in ("tp", "pp", "vpp", "dp", "cp", "ep", "mb"):
        if getattr(v, k) < 1:
            raise ConfigError(f"strategy {k}={getattr(v, k)} must be at least 1", fix=f"e.g. {k}=1")
    if v.offload_layers < 0:
        raise ConfigError(
            f"strategy offload_layers={v.offload_layers} is negative",
            fix="give the layers of each stage to offload, or 0 (with offload=1) for all of them",
        )
    for k in ("etp", "hsdp", "ga"):
        if getattr(v, k) < 0:
            raise ConfigError(
                f"strategy {k}={getattr(v, k)} must be 0 (derived) or positive",
                fix=f"drop {k} or give a positive value",
            )
    if v.zero not in (0, 1, 2, 3):
        raise ConfigError(f"zero={v.zero} is not a ZeRO stage", fix="zero=0, 1, 2 or 3 (3 = FSDP)")
    _check_schedule(v)
    if v.keep_params and v.zero != 3:
        raise ConfigError(
            "keeping gathered weights (reshard_after_forward=false) applies to ZeRO-3 / FSDP", fix="add zero=3"
        )
    if tp_overlap_needs_sp(v.tp_overlap) and not v.sp:
        raise ConfigError(
            f"TP/GEMM overlap {TP_OVERLAP[v.tp_overlap]} (it splits all-gathers and reduce-scatters) needs sequence parallelism",
            fix="drop sp=0, or use tp_overlap=bwd (the backward all-reduce under the weight-gradient GEMM)",
        )
    if v.hsdp and v.zero != 3:
        raise ConfigError("hsdp (shard group size) applies to ZeRO-3 / FSDP", fix="add zero=3")


def _check_schedule(v: Strategy) -> None:
    if v.sched == SCHEDULES.index("afab") and v.vpp != 1:
        raise ConfigError("AFAB (GPipe) runs one model chunk per stage", fix="drop vpp or use sched=1f1b (interleaved)")
    if v.sched == SCHEDULES.index("zb-v") and v.vpp != 2:
        raise ConfigError("ZB-V needs two model chunks per stage", fix="add vpp=2 with sched=zb-v")
    if v.sched == SCHEDULES.index("dualpipe") and (v.vpp != 1 or v.pp % 2):
        raise ConfigError(
            "DualPipe runs one stage per rank in each direction over an even number of ranks",
            fix="use an even pp without vpp, or sched=dualpipev with vpp=2",
        )
    if v.sched == SCHEDULES.index("dualpipev") and v.vpp != 2:
        raise ConfigError("DualPipeV needs two model chunks per stage", fix="add vpp=2 with sched=dualpipev")
    if v.sched == SCHEDULES.index("dualpipev") and v.cp > 1:
        # MindSpeed-LLM's dualpipev_feature.py, the one implementation, asserts context_parallel_size == 1
        raise ConfigError("DualPipeV runs without context parallelism", fix="drop cp, or use another schedule")


FIELDS = tuple(f.name for f in dataclasses.fields(Strategy) if f.name not in ("given", "layernorm"))
STRATEGY_DEFAULTS: dict[str, int] = {k: int(getattr(Strategy(), k)) for k in FIELDS}


def _flag(v: str, part: str) -> int:
    if v in ("1", "true", "yes", "on"):
        return 1
    if v in ("0", "false", "no", "off"):
        return 0
    raise ConfigError(f"strategy value {part!r} is not on/off", fix="use 0/1 or true/false")


def parse_value(key: str, value: str, part: str) -> tuple[str, int]:
    """One ``key=value`` item as (strategy field, its code): names for recompute policies,
    schedules and TP overlap mechanisms, true/false for flags, integers otherwise; aliases
    (KEY_ALIASES) resolved, FSDP2's ``reshard_after_forward`` as the opposite of keep_params."""
    k = KEY_ALIASES.get(key, key)
    if k not in STRATEGY_DEFAULTS and k != "reshard":
        raise ConfigError(f"unknown strategy key {k!r}", fix=f"keys: {', '.join(FIELDS)}")
    if k == "recompute":
        # "save out_proj", "save-dot-except-mlp": the policies' written names; Megatron's
        # --recompute-modules layernorm is layernorm_moe_act on a dense model
        value = "_".join(value.replace("-", " ").split())
        value = RECOMPUTE_ALIASES.get(value, value)
        if value not in RECOMPUTE:
            raise ConfigError(f"recompute must be one of {RECOMPUTE}", fix="e.g. recompute=selective")
        return k, RECOMPUTE.index(value)
    if k == "sched":
        v = _SCHEDULE_NAMES.get(value, value)
        if v not in SCHEDULES:
            raise ConfigError(f"sched must be one of {SCHEDULES}", fix="e.g. sched=zb-h1")
        return k, SCHEDULES.index(v)
    if k == "reshard":  # FSDP2's name, the opposite of keep_params
        return "keep_params", 1 - _flag(value, part)
    if k == "tp_overlap" and value in TP_OVERLAP:
        return k, TP_OVERLAP.index(value)
    if k in ("offload", "tp_overlap", "ep_overlap", "keep_params", "sp"):
        return k, _flag(value, part)
    try:
        return k, int(value)
    except ValueError:
        raise ConfigError(f"strategy value {part!r} is not an integer", fix="e.g. tp=8") from None


def parse_strategy(text: str) -> dict[str, np.ndarray]:
    """``"tp=8,pp=8,dp=16,vpp=2,mb=1,recompute=selective"`` -> one-element arrays. Missing keys: 1,
    recompute none, zero 0, etp = tp, hsdp off (0), sched 1f1b, offload 0, tp_overlap 0, ep_overlap 0,
    keep_params 0 (``reshard_after_forward=false`` is the same as keep_params=1), ga 0 (gradient
    accumulation derived from the batch: global batch / (dp x mb), at least pp micro-batches under
    a pipeline; ga=N runs exactly N micro-batches of global batch / (dp x N) sequences, fewer than
    pp too, as a framework does when told so). ``sched`` takes a name (1f1b, zb-h1, zb-v; afab =
    gpipe, dualpipe and dualpipev are searched only when --where names them: AFAB only adds memory,
    and few frameworks run the DualPipes: DeepSeek's own, PyTorch's ScheduleDualPipeV);
    ``tp_overlap`` a mechanism name (none, full, bwd, bwd+shard) or 0/1 (true = full); ``offload``,
    ``ep_overlap``, ``keep_params`` 0/1 or true/false; ``sp`` (sequence parallelism with TP, default
    on) 0/1; ``offload_layers=N`` (Megatron's ``--cpu-offloading-num-layers``) offloads N layers of
    each stage instead of all of them (0)."""
    return Strategy.parse(text).arrays()
