#!/usr/bin/env python3
"""Writes the tiny MoE checkpoints tests/test_moe_checkpoints.cpp runs the moe op on, and what it
expects:

    make_moe_checkpoints.py OUTDIR

OUTDIR gets one model directory per case (config.json + model.safetensors, written by the
`safetensors` package) and expected.json. Deterministic (numpy seed), float32, two decoder layers
of hidden 32, 4 experts of intermediate 16, top-2:

  qwen3_moe_experts   Qwen3-MoE with per-expert tensors (mlp.experts.E.{gate,up,down}_proj, as
                      transformers saves them) and its router mlp.gate.weight [E, H];
  qwen3_moe_stacked   the same values as transformers 5's Qwen3MoeExperts holds them:
                      mlp.experts.gate_up_proj [E, 2I, H] (gate rows, then up) and
                      mlp.experts.down_proj [E, H, I];
  deepseek_v3         DeepSeek-V3 (MLA, dense layer 0, layer 1 routed experts, a shared expert,
                      the router's e_score_correction_bias [E], grouped top-k);
  hostile/*           copies with one fault each (an expert's tensor missing, a stack of the
                      wrong shape, no router, a router of the wrong shape): the run must exit 2
                      naming the tensor.

expected.json holds, per good case and MoE layer, the moe op's w13 [E * 2I, H] and w2 [E * H, I]
as a transcription of vLLM's FusedMoE weight_loader builds them (w1 into the first half of each
expert's w13, w3 into the second, w2 into w2; tp 1), the router weight and bias, and the
shared expert's gate/up/down.
"""
import json
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file

H, E, I, K, HEADS, KV, HD, LAYERS = 32, 4, 16, 2, 4, 2, 8, 2
SHARED = 16  # deepseek_v3: n_shared_experts 1 * moe_intermediate_size


def w(rng, rows, cols):
    return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)


class FusedMoE:
    """Every expert's w13 [E, 2I, H] and w2 [E, H, I] at tp 1, loaded as
    vllm/model_executor/layers/fused_moe/layer.py's weight_loader does (_load_w13 with shard_id
    w1 or w3 along dim 0 of the expert's w13, _load_w2)."""

    def __init__(self):
        self.w13 = np.full((E, 2 * I, H), np.nan, np.float32)
        self.w2 = np.full((E, H, I), np.nan, np.float32)

    def weight_loader(self, loaded, shard_id, expert_id):
        if shard_id == "w2":
            self.w2[expert_id] = loaded
            return
        half = self.w13.shape[1] // 2
        if shard_id == "w1":
            self.w13[expert_id, :half] = loaded
        else:  # w3
            self.w13[expert_id, half:] = loaded


def qwen3_layer(rng, p):
    t = {p + "input_layernorm.weight": np.ones(H, np.float32),
         p + "post_attention_layernorm.weight": np.ones(H, np.float32)}
    for s, rows in (("q", HEADS * HD), ("k", KV * HD), ("v", KV * HD)):
        t[p + f"self_attn.{s}_proj.weight"] = w(rng, rows, H)
    t[p + "self_attn.o_proj.weight"] = w(rng, H, HEADS * HD)
    t[p + "self_attn.q_norm.weight"] = np.ones(HD, np.float32)
    t[p + "self_attn.k_norm.weight"] = np.ones(HD, np.float32)
    return t


def experts(rng):
    """Per expert: (gate [I, H], up [I, H], down [H, I])."""
    return [(w(rng, I, H), w(rng, I, H), w(rng, H, I)) for _ in range(E)]


def expected_layer(ex, router, bias=None, shared=None):
    m = FusedMoE()
    for e, (g, u, d) in enumerate(ex):
        m.weight_loader(g, "w1", e)
        m.weight_loader(u, "w3", e)
        m.weight_loader(d, "w2", e)
    assert not np.isnan(m.w13).any() and not np.isnan(m.w2).any()
    out = {"w13": m.w13.reshape(E * 2 * I, H).ravel().tolist(),
           "w2": m.w2.reshape(E * H, I).ravel().tolist(),
           "router": router.ravel().tolist(),
           "bias": [] if bias is None else bias.ravel().tolist()}
    if shared is not None:
        out["shared"] = {k: v.ravel().tolist() for k, v in shared.items()}
    return out


def qwen3_moe(rng):
    """(per-expert tensors, stacked tensors, config, expected per layer)."""
    cfg = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": H,
           "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HD,
           "intermediate_size": 48, "moe_intermediate_size": I, "num_experts": E,
           "num_experts_per_tok": K, "norm_topk_prob": True, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "num_hidden_layers": LAYERS, "vocab_size": 16,
           "hidden_act": "silu", "attention_bias": False, "torch_dtype": "float32"}
    per_expert, stacked, expected = {}, {}, {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        common = qwen3_layer(rng, p)
        router = w(rng, E, H) * 4  # logits of a few units: a routing that depends on the router
        common[p + "mlp.gate.weight"] = router
        ex = experts(rng)
        per_expert.update(common)
        stacked.update(common)
        for e, (g, u, d) in enumerate(ex):
            per_expert[p + f"mlp.experts.{e}.gate_proj.weight"] = g
            per_expert[p + f"mlp.experts.{e}.up_proj.weight"] = u
            per_expert[p + f"mlp.experts.{e}.down_proj.weight"] = d
        # transformers 5's Qwen3MoeExperts: gate_up_proj [E, 2I, H], gate rows first
        # (F.linear(x, gate_up_proj[e]).chunk(2, dim=-1)), down_proj [E, H, I].
        stacked[p + "mlp.experts.gate_up_proj"] = np.stack([np.concatenate([g, u]) for g, u, _ in ex])
        stacked[p + "mlp.experts.down_proj"] = np.stack([d for _, _, d in ex])
        expected[str(n)] = expected_layer(ex, router)
    return per_expert, stacked, cfg, expected


def deepseek_v3(rng):
    ql, kvl, rope, nope, vh = 16, 24, 8, 8, 8
    cfg = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
           "hidden_size": H, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
           "intermediate_size": 48, "moe_intermediate_size": I, "n_routed_experts": E,
           "n_shared_experts": SHARED // I, "num_experts_per_tok": K, "n_group": 2,
           "topk_group": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
           "first_k_dense_replace": 1, "moe_layer_freq": 1, "q_lora_rank": ql,
           "kv_lora_rank": kvl, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope,
           "v_head_dim": vh, "num_hidden_layers": LAYERS, "vocab_size": 16, "hidden_act": "silu",
           "torch_dtype": "float32"}
    t, expected = {}, {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        t[p + "self_attn.q_a_proj.weight"] = w(rng, ql, H)
        t[p + "self_attn.q_b_proj.weight"] = w(rng, HEADS * (nope + rope), ql)
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = w(rng, kvl + rope, H)
        t[p + "self_attn.kv_b_proj.weight"] = w(rng, HEADS * (nope + vh), kvl)
        t[p + "self_attn.o_proj.weight"] = w(rng, H, HEADS * vh)
        if n == 0:  # first_k_dense_replace: a dense MLP
            t[p + "mlp.gate_proj.weight"] = w(rng, 48, H)
            t[p + "mlp.up_proj.weight"] = w(rng, 48, H)
            t[p + "mlp.down_proj.weight"] = w(rng, H, 48)
            continue
        router = w(rng, E, H) * 4
        bias = (0.1 * rng.standard_normal(E)).astype(np.float32)
        t[p + "mlp.gate.weight"] = router
        t[p + "mlp.gate.e_score_correction_bias"] = bias
        ex = experts(rng)
        for e, (g, u, d) in enumerate(ex):
            t[p + f"mlp.experts.{e}.gate_proj.weight"] = g
            t[p + f"mlp.experts.{e}.up_proj.weight"] = u
            t[p + f"mlp.experts.{e}.down_proj.weight"] = d
        shared = {"gate": w(rng, SHARED, H), "up": w(rng, SHARED, H), "down": w(rng, H, SHARED)}
        for k, v in shared.items():
            t[p + f"mlp.shared_experts.{k}_proj.weight"] = v
        expected[str(n)] = expected_layer(ex, router, bias, shared)
    return t, cfg, expected


def write(out, name, tensors, cfg):
    root = os.path.join(out, name)
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()},
              os.path.join(root, "model.safetensors"), metadata={"format": "pt"})
    return root


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = np.random.default_rng(20261203)
    per_expert, stacked, qcfg, qexp = qwen3_moe(rng)
    ds, dcfg, dexp = deepseek_v3(rng)
    write(out, "qwen3_moe_experts", per_expert, qcfg)
    write(out, "qwen3_moe_stacked", stacked, qcfg)
    write(out, "deepseek_v3", ds, dcfg)
    manifest = {"cases": {"qwen3_moe_experts": {"moe_layers": [0, 1], "layers": qexp},
                          "qwen3_moe_stacked": {"moe_layers": [0, 1], "layers": qexp},
                          "deepseek_v3": {"moe_layers": [1], "layers": dexp}},
                "experts": E, "hidden": H, "intermediate": I, "shared": SHARED, "hostile": []}

    def hostile(name, base, cfg, change, tensor, args=""):
        t = dict(base)
        change(t)
        write(out, os.path.join("hostile", name), t, cfg)
        manifest["hostile"].append({"dir": "hostile/" + name, "tensor": tensor, "args": args})

    gone = "model.layers.1.mlp.experts.3.down_proj.weight"
    hostile("missing_expert", per_expert, qcfg, lambda t: t.pop(gone), gone, "--layer=1")
    stack = "model.layers.0.mlp.experts.down_proj"
    hostile("wrong_stack_shape", stacked, qcfg,
            lambda t: t.__setitem__(stack, np.zeros((E, H, I + 1), np.float32)), stack)
    router = "model.layers.0.mlp.gate.weight"
    hostile("missing_router", per_expert, qcfg, lambda t: t.pop(router), router)
    hostile("wrong_router_shape", per_expert, qcfg,
            lambda t: t.__setitem__(router, np.zeros((E + 1, H), np.float32)), router)
    bias = "model.layers.1.mlp.gate.e_score_correction_bias"
    hostile("missing_correction_bias", ds, dcfg, lambda t: t.pop(bias), bias, "--layer=1")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(manifest, f)
    print(f"make_moe_checkpoints: 3 checkpoints, {len(manifest['hostile'])} hostile, in {out}")


if __name__ == "__main__":
    main()
