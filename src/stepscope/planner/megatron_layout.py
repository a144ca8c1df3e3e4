"""Megatron-LM's ``--pipeline-model-parallel-layout`` for a pipeline split its count switches cannot
give.

Megatron splits the decoder layers over the pipeline ranks by count: evenly, or with
``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers`` for the end ranks
(the rest even over the middle ones), or with ``--account-for-embedding-in-pipeline-split`` and
``--account-for-loss-in-pipeline-split`` counting the embedding and the loss as a layer each. Each
way asserts that every rank's count divides by the virtual stages per rank and, for the last,
that pp divides L + 2 (``get_num_layers_to_build`` in megatron/core/transformer/
transformer_block.py). Where the planner's split breaks one of those (stages.py: 126 layers with
the embedding and loss on 16 ranks with 4 virtual stages each; DeepSeek-V3's 61 on 16 with 2), the
row runs only with an explicit layout (megatron/core/transformer/pipeline_parallel_layer_layout.py):
one string per virtual stage, in order virtual stage x pp + rank, joined by ``|``; ``E`` the
embedding (first), ``t`` a decoder layer, ``m`` a multi-token-prediction layer (after every
decoder layer, in the last virtual stage), ``L`` the loss (last); ``x*n`` repeats a character and
``(...)*n`` a group. NVIDIA's own recipes use it for the same splits (Qwen3-235B's 94 layers at PP8
VP4, DeepSeek-V3's 61 at PP16 VP2)."""

from __future__ import annotations

import numpy as np

from .stages import end_split


def rank_layers(layers: int, pp: int, split_embedding: bool) -> list[int]:
    """Decoder layers per pipeline rank as the planner splits them (stages.stage_layers):
    - without ``split_embedding``: L / pp each when pp divides L, else the end ranks of
      :func:`stages.end_split` and the rest even over the middle ones (the larger shares first);
    - with it: the embedding and the loss count as a layer each; the end ranks hold
      ceil((L + 2) / pp) - 1 layers (pp > 2), the middle ones the rest, as evenly as possible
      (the larger shares first). With 2 ranks the first holds ceil(L / 2)."""
    if pp <= 1:
        return [layers]
    if split_embedding:
        if pp == 2:
            return [(layers + 1) // 2, layers // 2]
        end = int(np.ceil((layers + 2) / pp)) - 1
        return [end, *_even(layers - 2 * end, pp - 2), end]
    if layers % pp == 0:
        return [layers // pp] * pp
    _, first, last = end_split(float(layers), np.array([pp]))
    ends = [int(first[0]), int(last[0])]
    if pp == 2:
        return ends
    return [ends[0], *_even(layers - sum(ends), pp - 2), ends[1]]


def _even(n: int, parts: int) -> list[int]:
    """``n`` as ``parts`` counts differing by at most one, the larger first."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def counts_run(layers: int, pp: int, vpp: int, split_embedding: bool) -> bool:
    """Whether Megatron's count switches give the planner's split (module docstring)."""
    if pp <= 1:
        return True
    if split_embedding:
        return (layers + 2) % pp == 0 and ((layers + 2) // pp) % vpp == 0
    return all(n % vpp == 0 for n in rank_layers(layers, pp, split_embedding))


def layout(layers: int, pp: int, vpp: int, split_embedding: bool, mtp: int = 0) -> str:
    """The layout string of the planner's split: each rank's decoder layers spread over its
    ``vpp`` virtual stages as evenly as possible (the earlier stages take the extra ones), the
    embedding and the loss counted in their stages when ``split_embedding``; ``mtp`` layers
    before the loss in the last stage."""
    per_rank = rank_layers(layers, pp, split_embedding)
    stages: list[str] = [""] * (pp * vpp)
    for r, n in enumerate(per_rank):
        head = 1 if split_embedding and r == 0 else 0
        tail = 1 if split_embedding and r == pp - 1 else 0
        units = _even(n + head + tail, vpp)
        units[0] -= head
        units[-1] -= tail
        if min(units) < 0:  # fewer layers than stages (an --evaluate row): the layers alone, evenly
            units = _even(n, vpp)
        for v, count in enumerate(units):
            stages[v * pp + r] = _run("t", count)
    stages[0] = "E" + stages[0]
    stages[-1] = stages[-1] + _run("m", mtp) + "L"
    return _compress(stages)


def _run(char: str, n: int) -> str:
    return char * n if n < 2 else f"{char}*{n}"


def _compress(stages: list[str]) -> str:
    """Consecutive equal stages as ``(s|)*n``; the parts joined by ``|``."""
    out, i = [], 0
    while i < len(stages):
        j = i
        while j + 1 < len(stages) and stages[j + 1] == stages[i]:
            j += 1
        n = j - i + 1
        last = j == len(stages) - 1
        if n == 1:
            out.append(stages[i] + ("" if last else "|"))
        elif last:
            out.append(f"({stages[i]}|)*{n - 1}{stages[i]}")
        else:
            out.append(f"({stages[i]}|)*{n}")
        i = j + 1
    return "".join(out)
