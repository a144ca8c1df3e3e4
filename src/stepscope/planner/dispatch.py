"""Expert parallelism's token exchange: the all-to-all of each MoE layer, and DeepEP's
node-deduplicated form.

Per MoE layer and micro-batch a rank sends its tokens' routed copies to the experts' ranks and
gets them back (dispatch and combine), forward and backward: four transfers of
``tokens x k x h x 2`` bytes (bf16), the most loaded rank's (``moe_imbalance``).

- ``ep_dispatch="all_to_all"`` (Megatron's alltoall dispatcher, torchtitan): each copy goes to its
  expert's rank; (ep - 1)/ep of them leave the rank. Inside a node they cross its links; in a
  group across nodes the copies for ranks on other nodes (1 - node/span of them, the group's
  ranks spread evenly over its span) go over the rank's network link while those for the ranks
  of its own node go over NVLink at the same time (NCCL's all-to-all posts a send to every peer
  at once, each over its own path), so the exchange takes the longer of the two.
- ``ep_dispatch="deepep"`` (DeepEP's normal kernels, as DeepSeek-V3 trains and Megatron's flex
  dispatcher runs them): a token crosses the network once per destination node, to the GPU with
  its own in-node index, which forwards it over NVLink to the experts' GPUs there (DeepSeek-V3
  report, section 3.2.2). Across nodes a token then moves ``remote_nodes`` copies instead of k,
  inside the destination node up to k; the two stages pipeline, so the transfer takes the longer.
  With group-limited routing (``ModelShape.routing_groups``, DeepSeek-V3's n_group 8 /
  topk_group 4) a token reaches at most the nodes of its chosen groups. Inside one node both
  dispatchers are the same all-to-all. DeepEP's kernels run on SMs of their own
  (``deepep_sms``, 20: DeepEP's and Megatron's default, the 20 of DeepSeek-V3's report), so the
  compute an exchange hides under runs on the rest (:func:`sm_contention_s`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..catalog.model_flops import ModelShape


def _miss(pool: np.ndarray, n_nodes: np.ndarray, k: float) -> np.ndarray:
    """P(one node of ``n_nodes`` gets none of a token's k distinct experts), the experts drawn
    uniformly without replacement from ``pool`` experts spread evenly over the nodes:
    prod_i (pool - pool / n_nodes - i) / (pool - i), i < k."""
    out = np.ones(np.broadcast(pool, n_nodes).shape)
    for i in range(int(k)):  # k is a model constant (a handful): a loop over it, not over configurations
        out = out * np.maximum(pool - pool / n_nodes - i, 0.0) / np.maximum(pool - i, 1.0)
    return out


def remote_nodes(m: ModelShape, nodes: np.ndarray) -> np.ndarray:
    """Expected nodes other than its own that a token's k routed experts sit on, with the experts
    spread evenly over ``nodes`` nodes (uniform routing: the balance the planner assumes). Without
    group limits: nodes x (1 - P(a node gets none)) x (nodes - 1)/nodes. With G groups of which M
    per token: when each node holds G/nodes whole groups, the nodes of M groups drawn from G (at
    most the unlimited count: M groups need not all get an expert); when each group spans
    nodes/G nodes, the k experts fall on the M x nodes/G nodes of the chosen groups."""
    n = np.maximum(np.asarray(nodes, dtype=np.float64), 1.0)
    E, k = float(m.n_experts), float(m.experts_per_token)
    reach = n * (1.0 - _miss(np.full(n.shape, E), n, k))
    G, M = float(m.routing_groups), float(m.routing_group_topk)
    if G and M:
        nested = (G >= n) & (np.mod(G, n) == 0)  # each node holds G / n whole groups
        groups_reach = n * (1.0 - _miss(np.full(n.shape, G), n, M))  # the nodes of M of G groups
        pool_n = M * n / G  # each group spans n / G nodes: the chosen groups' nodes
        pool_reach = pool_n * (1.0 - _miss(np.full(n.shape, M * E / G), np.maximum(pool_n, 1.0), k))
        spans = (n > G) & (np.mod(n, G) == 0)
        reach = np.where(nested, np.minimum(groups_reach, reach), np.where(spans, np.minimum(pool_reach, reach), reach))
    return np.asarray(reach * (n - 1.0) / n)


def exchange_seconds(
    m: ModelShape,
    *,
    dispatch: str,
    tokens: np.ndarray,
    h: float,
    imbalance: float,
    ep: np.ndarray,
    span: np.ndarray,
    node: float,
    link: Callable[..., np.ndarray],
) -> np.ndarray:
    """Seconds of one MoE layer's four exchanges (module docstring) for ``tokens`` tokens on the
    rank. ``span``: the ranks the EP group covers; ``link(span, ranks)``: bytes/s of a group's
    collective over ``span`` ranks (links.Links.bandwidth), ``link(span)`` a rank's point-to-point
    rate there (its network beyond ``node`` ranks, NVLink within)."""
    k = float(m.experts_per_token)
    copy_b = 4.0 * tokens * h * 2.0 * imbalance  # one copy of each token, four transfers
    own = 1.0 / np.maximum(ep, 1.0)  # the share of the copies that stay on the rank
    within = copy_b * k * (1.0 - own) / link(span, ep)
    local = np.clip(node / np.maximum(span, 1.0), own, 1.0)  # the group's share of ranks on this node
    across = np.maximum(
        copy_b * k * (1.0 - local) / link(np.full(np.shape(span), node + 1.0)),  # the rank's own network link
        copy_b * k * (local - own) / link(np.ones(np.shape(span))),
    )
    plain = np.where(span > node, across, within)
    if dispatch != "deepep":
        return np.asarray(plain)
    nodes = np.maximum(span / node, 1.0)
    inter = copy_b * remote_nodes(m, nodes) / link(np.full(np.shape(span), node + 1.0))
    intra = (
        copy_b * k * (node - 1.0) / node / link(np.ones(np.shape(span)))
    )  # the forwarding inside the destination node
    return np.asarray(np.where(span > node, np.maximum(inter, intra), plain))


def sm_contention_s(dispatch: str, hidden_s: np.ndarray, comm_sms: int, sms: int | None) -> np.ndarray | float:
    """Seconds the compute loses to DeepEP's kernels while they overlap it: for ``hidden_s`` of
    exchange hidden under compute, the compute runs on (sms - comm_sms) of the device's ``sms``
    SMs, f / (1 - f) x hidden_s longer (f = comm_sms / sms, at most 0.9); 0 for the all-to-all
    (NCCL's share is in the overlap priors) and where the catalog gives no SM count."""
    if dispatch != "deepep" or not sms:
        return 0.0
    f = min(comm_sms / sms, 0.9)
    return np.asarray(hidden_s) * f / (1.0 - f)
