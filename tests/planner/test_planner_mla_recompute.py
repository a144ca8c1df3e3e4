"""Megatron-core's --recompute-modules mla_up_proj (recompute=mla_up_proj, and with layernorm and
moe_act: recompute=layernorm_mla_up_proj_moe_act), by hand on a small multi-latent attention model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.planner.cost import evaluate
from stepscope.planner.recompute import RECOMPUTE
from stepscope.planner.record import job_from_record
from stepscope.planner.search import space
from stepscope.planner.strategy import parse_strategy

# h 1024, 4 layers, 8 heads; q latent 256, kv latent 128, q/k per head 64 nope + 32 rope, v 64;
# a dense gated MLP of 2048; vocabulary 1000
MLA = {
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 2048,
    "vocab_size": 1000,
    "q_lora_rank": 256,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
}


@pytest.fixture
def mla_job(tmp_path: Path):  # noqa: ANN201
    path = tmp_path / "mla.json"
    path.write_text(json.dumps(MLA))
    return job_from_record({"model": str(path), "hardware": "h100", "devices": 8, "global_batch": 8, "seq_len": 1024})


def _run(job, policy: str) -> dict:  # noqa: ANN001
    return evaluate(job, parse_strategy(f"tp=1,pp=1,dp=8,zero=1,mb=1,recompute={policy}"))


def test_per_head_q_k_v_not_stored_by_hand(mla_job) -> None:  # noqa: ANN001
    """Freed per token and layer: 8 heads x (q 96 + k 96 + v 64) = 2,048 elements, 2 B each: 4,096 B;
    1,024 tokens: 4,194,304 B a layer. All 4 layers of the one micro-batch are held; backward
    regenerates one layer's (that much live again): 3 x 4,194,304 B fewer. The same on top of
    layernorm_moe_act (layernorm on this dense model)."""
    none, mla = _run(mla_job, "none"), _run(mla_job, "mla_up_proj")
    assert float(none["activations_gb"][0] - mla["activations_gb"][0]) == pytest.approx(3 * 4_194_304 / 1e9, rel=1e-9)
    norm, both = _run(mla_job, "layernorm_moe_act"), _run(mla_job, "layernorm_mla_up_proj_moe_act")
    assert float(norm["activations_gb"][0] - both["activations_gb"][0]) == pytest.approx(3 * 4_194_304 / 1e9, rel=1e-9)


def test_up_projections_recomputed_by_hand(mla_job) -> None:  # noqa: ANN001
    """Recomputed forward per token and layer: q up 256 x 8 x 96 + kv up 128 x 8 x (64 + 64) =
    327,680 multiply-adds, 655,360 FLOPs; 4 layers, x 3 against forward + backward: 7,864,320.
    The layers' FLOPs per token (forward and backward): 6 x matmul weights (attention 1,277,952 and
    the MLP 6,291,456 per layer, x 4) + causal attention 6 x 8 x (96 + 64) x 4 x 512 = 197,394,432.
    HFU / MFU is the recompute factor: 1 + 7,864,320 / 197,394,432. No collective is replayed."""
    none, mla = _run(mla_job, "none"), _run(mla_job, "mla_up_proj")
    assert float(mla["hfu"][0] / mla["mfu"][0]) == pytest.approx(1 + 7_864_320 / 197_394_432, rel=1e-9)
    assert float(mla["compute_s"][0]) > float(none["compute_s"][0])
    both = _run(mla_job, "layernorm_mla_up_proj_moe_act")
    assert float(both["hfu"][0] / both["mfu"][0]) == pytest.approx(1 + 7_864_320 / 197_394_432, rel=1e-9)
    tp2 = [evaluate(mla_job, parse_strategy(f"tp=2,dp=4,zero=1,recompute={p}")) for p in ("none", "mla_up_proj")]
    assert float(tp2[0]["tp_s"][0]) == float(tp2[1]["tp_s"][0]) > 0  # the same TP collectives, none replayed


def test_searched_for_mla_models_only(mla_job) -> None:  # noqa: ANN001
    """The two policies add 2 to the 13 others for an MLA model (15/13 x the configurations) and none
    for the same model without MLA."""
    plain = dataclasses.replace(mla_job, model=dataclasses.replace(mla_job.model, mla=None))
    with_mla, without = space(mla_job), space(plain)
    assert with_mla["tp"].size * 13 == 15 * without["tp"].size
    names = {RECOMPUTE[int(k)] for k in set(without["recompute"].tolist())}
    assert "mla_up_proj" not in names and "layernorm_mla_up_proj_moe_act" not in names
    assert {"mla_up_proj", "layernorm_mla_up_proj_moe_act"} <= {
        RECOMPUTE[int(k)] for k in set(with_mla["recompute"].tolist())
    }


def test_refused_for_a_model_without_mla(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=8,zero=1,recompute=mla_up_proj",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "multi-latent attention" in err and "recompute=none" in err
