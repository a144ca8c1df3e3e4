"""Generate a real JAX profile (XPlane + trace.json.gz) and HLO text on CPU, for tests.

    XLA_FLAGS=--xla_force_host_platform_device_count=4 python scripts/gen_jax_profile.py OUT_DIR [--steps 3]

A small transformer-like training step, jitted, over 4 CPU devices:
- named scopes ``embed``, ``layer``, ``attention``, ``mlp``, ``moe``, ``head`` (``jax.named_scope``);
- the layer stack is a ``jax.lax.scan`` over 2 layers whose body is ``jax.checkpoint``-ed with the
  ``dots_with_no_batch_dims_saveable`` policy (so the backward pass recomputes the non-dot work);
- data parallel over a 4-device mesh with ``shard_map``: the gradients are all-reduced with
  ``jax.lax.psum`` (collectives appear in the HLO and the profile).
Writes ``OUT_DIR/plugins/profile/<run>/<host>.xplane.pb`` (jax.profiler) and
``OUT_DIR/train_step.hlo.txt`` (the compiled module's HLO text). Steps are marked with
``jax.profiler.StepTraceAnnotation``.
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:  # older jax
        from jax.experimental.shard_map import shard_map  # type: ignore[no-redef]

    n_dev = len(jax.devices())
    mesh = Mesh(jax.devices(), ("data",))
    d, f, vocab, seq, batch, layers = 64, 256, 512, 32, 4 * n_dev, 2

    def init(key: jax.Array) -> dict:
        ks = jax.random.split(key, 6)
        s = 0.02
        return {
            "emb": jax.random.normal(ks[0], (vocab, d)) * s,
            "wqkv": jax.random.normal(ks[1], (layers, d, 3 * d)) * s,
            "wo": jax.random.normal(ks[2], (layers, d, d)) * s,
            "w1": jax.random.normal(ks[3], (layers, d, f)) * s,
            "w2": jax.random.normal(ks[4], (layers, f, d)) * s,
            "head": jax.random.normal(ks[5], (d, vocab)) * s,
        }

    def layer(x: jax.Array, w: tuple) -> tuple[jax.Array, None]:
        wqkv, wo, w1, w2 = w
        with jax.named_scope("attention"):
            q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
            att = jax.nn.softmax(jnp.einsum("bsd,btd->bst", q, k) / jnp.sqrt(d), axis=-1)
            x = x + jnp.einsum("bst,btd->bsd", att, v) @ wo
        with jax.named_scope("mlp"):
            x = x + jax.nn.gelu(x @ w1) @ w2
        return x, None

    remat_layer = jax.checkpoint(layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)

    def loss_fn(params: dict, tokens: jax.Array) -> jax.Array:
        with jax.named_scope("embed"):
            x = params["emb"][tokens]
        with jax.named_scope("layers"):
            x, _ = jax.lax.scan(remat_layer, x, (params["wqkv"], params["wo"], params["w1"], params["w2"]))
        with jax.named_scope("head"):
            logits = x @ params["head"]
            return -jnp.mean(jax.nn.log_softmax(logits)[..., 0])

    @partial(shard_map, mesh=mesh, in_specs=(P(), P("data")), out_specs=(P(), P()))
    def grads_dp(params: dict, tokens: jax.Array) -> tuple:
        loss, g = jax.value_and_grad(loss_fn)(params, tokens)
        with jax.named_scope("grad_allreduce"):
            g = jax.tree_util.tree_map(lambda t: jax.lax.psum(t, "data") / n_dev, g)
        return jax.lax.pmean(loss, "data"), g

    @jax.jit
    def train_step(params: dict, tokens: jax.Array) -> tuple:
        loss, g = grads_dp(params, tokens)
        with jax.named_scope("optimizer"):
            params = jax.tree_util.tree_map(lambda p, gg: p - 1e-3 * gg, params, g)
        return params, loss

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    params = init(jax.random.PRNGKey(0))
    tokens = jax.random.randint(jax.random.PRNGKey(1), (batch, seq), 0, vocab)
    (out / "train_step.hlo.txt").write_text(train_step.lower(params, tokens).compile().as_text())
    params, loss = train_step(params, tokens)  # compile outside the profile
    jax.block_until_ready(loss)
    opts = jax.profiler.ProfileOptions()
    opts.python_tracer_level = 0  # the Python tracer would add ~100k frames per step
    jax.profiler.start_trace(str(out), profiler_options=opts)
    for step in range(a.steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            params, loss = train_step(params, tokens)
            jax.block_until_ready(loss)
    jax.profiler.stop_trace()
    print(f"loss {float(loss):.4f}; wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
