"""Memory per device of each configuration (cost.py's memory model): weights, gradients and
optimizer states by ZeRO stage (states.py), activations by recompute policy and schedule
(activations.py), communication buffers (buffers.py) and the framework reserve."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .activations import activations
from .buffers import comm_buffer_bytes, gather_bytes, largest_tensor_params
from .job import Job
from .layout import Layout, opt
from .rates import params
from .stages import StageParams
from .states import state_bytes


@dataclass(frozen=True, kw_only=True)
class Footprint:
    """Bytes per device by part and in total; ``act_layer`` the bytes one stored layer of a
    micro-batch takes, ``rfactor`` the recompute factor by policy, ``sp`` sequence parallelism 0/1,
    ``gather_b`` the bytes of one ZeRO-3 all-gather of the stage's weights, ``offloaded`` the layers
    of each micro-batch that go to the host."""

    weights_b: np.ndarray
    grads_b: np.ndarray
    optimizer_b: np.ndarray
    activations_b: np.ndarray
    buffers_b: np.ndarray
    reserve_b: np.ndarray
    total_b: np.ndarray
    act_layer: np.ndarray
    rfactor: np.ndarray
    sp: np.ndarray
    gather_b: np.ndarray
    offloaded: np.ndarray


def footprint(job: Job, lay: Layout, st: StageParams) -> Footprint:
    """The memory of the most loaded stage (stages.stage_params) under the layout."""
    m, tp = job.model, lay.tp
    _, _, emb = params(m)
    # activation offload: the layers of each micro-batch that go to the host (offload_layers, or all of the stage's)
    part = opt(lay.s, "offload_layers", tp)
    offloaded = np.where(lay.offload, np.where(part > 0, np.minimum(part, st.stage_L), st.stage_L), 0.0)
    # ZeRO-3's all-gather of the stage and the bytes per gathered parameter (fp8_all_gather)
    gather_b, unit_bytes = gather_bytes(job, p_dev=st.p_dev, layers_p=st.layers_p, unit_is_layer=st.layer_p >= emb / tp)
    w_b, g_b, o_b = state_bytes(
        job,
        p_dev=st.p_dev,
        zero=lay.zero,
        shard=lay.shard,
        keep=lay.keep,
        pp=lay.pp,
        e_dev=st.experts_p,
        ep_fold=lay.ep_fold,
    )
    act_b, act_layer, rfactor, sp = activations(
        job,
        lay.s,
        tp=tp,
        pp=lay.pp,
        cp=lay.cp,
        mb=lay.mb,
        n_micro=lay.n_micro,
        rc=lay.rc,
        sched=lay.sched,
        offloaded=offloaded,
        stage_L=st.stage_L,
        first_L=st.first_L,
        last_L=st.last_L,
    )
    # what ZeRO-3 holds gathered at once: a layer, or the embedding / output layer where it is
    # larger (FSDP wraps them as units of their own; Llama 3 8B's 128K x 4096 is 2.4 layers), or
    # gathered tensor by tensor, the largest tensor
    unit_p = (
        largest_tensor_params(m, job.framework.kernels.fused_projections, tp, lay.ep, lay.etp)
        if job.framework.zero.gather == "tensor"
        else np.maximum(st.layer_p, emb / tp)
    )
    buf_b = comm_buffer_bytes(
        lay.zero, lay.keep, unit_p, job.grad_bytes, static_memory=job.hw.static_memory, param_bytes=unit_bytes
    )
    reserve_b = np.full(tp.shape, job.reserve_bytes)
    return Footprint(
        weights_b=w_b,
        grads_b=g_b,
        optimizer_b=o_b,
        activations_b=act_b,
        buffers_b=buf_b,
        reserve_b=reserve_b,
        total_b=w_b + g_b + o_b + act_b + buf_b + reserve_b,
        act_layer=act_layer,
        rfactor=rfactor,
        sp=sp,
        gather_b=gather_b,
        offloaded=offloaded,
    )
