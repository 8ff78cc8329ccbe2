#!/usr/bin/env python3
"""Writes tiny checkpoints of the layouts make_tiny_checkpoints.py cannot save without torch:

    python3 tests/families/make_stacked_checkpoints.py tests/families/stacked_checkpoints

GraniteMoE-shared (3-D experts [E, 2I, H] / [E, H, I], fused shared_mlp), Llama-4 (3-D experts
[E, H, 2I] / [E, I, H], stored transposed against F.linear), DBRX (fused Wqkv; experts flattened
[E * I, H], w2 transposed per expert), HunYuan-MoE (per-expert tensors and shared_mlp) and
MiniCPM3 (MLA's q_a/kv_a, dense MLP). torch is not needed: config.json is written by
transformers' own config class, the projection tensors of every decoder layer with numpy (seed
0, float32) under the names and shapes transformers' modules give them (its modeling files;
transformers 5 saves MoE experts in these legacy layouts, conversion_mapping.py), and no other
tensor (norms, embeddings and routers are not read). expected.json holds, per checkpoint, the
layer and expert to read and each logical weight's [rows, cols] and row sums, cut from the stored
tensors the way vLLM's loaders cut them (each line below names the loader it follows).
tests/test_family_checkpoints.cpp reads them with fusebench and runs --weights --verify.
"""
import json
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file
from transformers import CONFIG_MAPPING

H, HEADS, KV, HD, LAYERS, E, I = 64, 4, 2, 16, 2, 4, 32
SMALL = dict(hidden_size=H, num_attention_heads=HEADS, num_key_value_heads=KV,
             num_hidden_layers=LAYERS, vocab_size=128, max_position_embeddings=64)


def attention(rng, prefix, q_rows=HEADS * HD, kv_rows=KV * HD):
    return {prefix + "q_proj.weight": rng.standard_normal((q_rows, H)),
            prefix + "k_proj.weight": rng.standard_normal((kv_rows, H)),
            prefix + "v_proj.weight": rng.standard_normal((kv_rows, H)),
            prefix + "o_proj.weight": rng.standard_normal((H, q_rows))}


def mlp(rng, prefix, inter):
    return {prefix + "gate_proj.weight": rng.standard_normal((inter, H)),
            prefix + "up_proj.weight": rng.standard_normal((inter, H)),
            prefix + "down_proj.weight": rng.standard_normal((H, inter))}


def granitemoeshared(rng):
    cfg = dict(SMALL, intermediate_size=I, num_local_experts=E, num_experts_per_tok=2,
               shared_intermediate_size=48)
    t = {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        t.update(attention(rng, p + "self_attn."))
        t[p + "block_sparse_moe.input_linear.weight"] = rng.standard_normal((E, 2 * I, H))
        t[p + "block_sparse_moe.output_linear.weight"] = rng.standard_normal((E, H, I))
        t[p + "shared_mlp.input_linear.weight"] = rng.standard_normal((2 * 48, H))
        t[p + "shared_mlp.output_linear.weight"] = rng.standard_normal((H, 48))
    layer, expert = 1, 2
    p = f"model.layers.{layer}."
    # granitemoe.py: input_linear -> experts.gate_up_proj, FusedMoE w13 [E, 2I, H] (gate first);
    # output_linear -> experts.down_proj, w2 [E, H, I].
    w13 = t[p + "block_sparse_moe.input_linear.weight"][expert]
    shared = t[p + "shared_mlp.input_linear.weight"]
    cut = {"w_expert_gate": w13[:I], "w_expert_up": w13[I:],
           "w_expert_down": t[p + "block_sparse_moe.output_linear.weight"][expert],
           # GraniteMoeSharedMLP: input_linear is MergedColumnParallelLinear [gate; up].
           "w_shared_expert_gate": shared[:48], "w_shared_expert_up": shared[48:]}
    return "granitemoeshared", cfg, t, layer, expert, cut


def llama4_text(rng):
    cfg = dict(SMALL, head_dim=HD, intermediate_size=I, intermediate_size_mlp=96,
               num_local_experts=E, num_experts_per_tok=1, interleave_moe_layer_step=2)
    t = {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        t.update(attention(rng, p + "self_attn."))
        if (n + 1) % 2 == 0:  # Llama4TextDecoderLayer: MoE on the interleave step
            t[p + "feed_forward.experts.gate_up_proj"] = rng.standard_normal((E, H, 2 * I))
            t[p + "feed_forward.experts.down_proj"] = rng.standard_normal((E, I, H))
            t.update(mlp(rng, p + "feed_forward.shared_expert.", I))
        else:
            t.update(mlp(rng, p + "feed_forward.", 96))
    layer, expert = 1, 3
    p = f"model.layers.{layer}."
    # llama4.py load_moe_expert_weights: transpose(-1, -2), then gate_up chunk(2, dim=-2).
    gate_up = t[p + "feed_forward.experts.gate_up_proj"][expert].T
    cut = {"w_expert_gate": gate_up[:I], "w_expert_up": gate_up[I:],
           "w_expert_down": t[p + "feed_forward.experts.down_proj"][expert].T,
           "w_q": t[p + "self_attn.q_proj.weight"]}
    return "llama4_text", cfg, t, layer, expert, cut


def dbrx(rng):
    cfg = dict(d_model=H, n_heads=HEADS, n_layers=LAYERS, vocab_size=128, max_seq_len=64,
               attn_config=dict(kv_n_heads=KV, rope_theta=500000.0),
               ffn_config=dict(ffn_hidden_size=I, moe_num_experts=E, moe_top_k=2))
    t = {}
    for n in range(LAYERS):
        a = f"transformer.blocks.{n}.norm_attn_norm.attn."
        x = f"transformer.blocks.{n}.ffn.experts.mlp."
        t[a + "Wqkv.weight"] = rng.standard_normal((HEADS * HD + 2 * KV * HD, H))
        t[a + "out_proj.weight"] = rng.standard_normal((H, HEADS * HD))
        for w in ("w1", "v1", "w2"):
            t[x + w] = rng.standard_normal((E * I, H))
    layer, expert = 0, 1
    a = f"transformer.blocks.{layer}.norm_attn_norm.attn."
    x = f"transformer.blocks.{layer}.ffn.experts.mlp."
    # DbrxAttention: QKVParallelLinear, rows [q; k; v]. DbrxExperts.weight_loader: w1, v1
    # reshaped [E, I, H]; w2 reshaped [E, I, H] and transposed to [E, H, I].
    wqkv = t[a + "Wqkv.weight"]
    cut = {"w_q": wqkv[:HEADS * HD], "w_k": wqkv[HEADS * HD:HEADS * HD + KV * HD],
           "w_v": wqkv[HEADS * HD + KV * HD:],
           "w_expert_gate": t[x + "w1"].reshape(E, I, H)[expert],
           "w_expert_up": t[x + "v1"].reshape(E, I, H)[expert],
           "w_expert_down": t[x + "w2"].reshape(E, I, H).transpose(0, 2, 1)[expert]}
    return "dbrx", cfg, t, layer, expert, cut


def hunyuan_v1_moe(rng):
    cfg = dict(SMALL, head_dim=HD, intermediate_size=I, num_experts=E, moe_topk=2,
               moe_intermediate_size=I, use_mixed_mlp_moe=1, num_shared_expert=1)
    t = {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        t.update(attention(rng, p + "self_attn."))
        for e in range(E):
            t.update(mlp(rng, p + f"mlp.experts.{e}.", I))
        t.update(mlp(rng, p + "mlp.shared_mlp.", I))
    layer, expert = 1, 3
    p = f"model.layers.{layer}."
    # hunyuan_v1.py (vLLM 0.23): FusedMoE expert mapping gate_proj/up_proj/down_proj per expert,
    # shared_mlp a HunYuanMLP.
    cut = {"w_expert_gate": t[p + f"mlp.experts.{expert}.gate_proj.weight"],
           "w_expert_down": t[p + f"mlp.experts.{expert}.down_proj.weight"],
           "w_shared_expert_up": t[p + "mlp.shared_mlp.up_proj.weight"]}
    return "hunyuan_v1_moe", cfg, t, layer, expert, cut


def minicpm3(rng):
    cfg = dict(SMALL, num_key_value_heads=HEADS, intermediate_size=96, q_lora_rank=32,
               kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8)
    t = {}
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        t[p + "self_attn.q_a_proj.weight"] = rng.standard_normal((32, H))
        t[p + "self_attn.q_b_proj.weight"] = rng.standard_normal((HEADS * 16, 32))
        t[p + "self_attn.kv_a_proj_with_mqa.weight"] = rng.standard_normal((16 + 8, H))
        t[p + "self_attn.kv_b_proj.weight"] = rng.standard_normal((HEADS * 16, 16))
        t[p + "self_attn.o_proj.weight"] = rng.standard_normal((H, HEADS * 8))
        t.update(mlp(rng, p + "mlp.", 96))
    layer = 1
    p = f"model.layers.{layer}."
    # MiniCPM3Attention: q_a_proj, kv_a_proj_with_mqa (ReplicatedLinear); MiniCPM3MLP (Llama's).
    cut = {"w_q_a": t[p + "self_attn.q_a_proj.weight"],
           "w_kv_a": t[p + "self_attn.kv_a_proj_with_mqa.weight"],
           "w_gate": t[p + "mlp.gate_proj.weight"], "w_down": t[p + "mlp.down_proj.weight"]}
    return "minicpm3", cfg, t, layer, 0, cut


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    expected = {}
    for make in (granitemoeshared, llama4_text, dbrx, hunyuan_v1_moe, minicpm3):
        name, kwargs, tensors, layer, expert, cut = make(rng)
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        CONFIG_MAPPING[name](**kwargs).save_pretrained(path)
        for extra in os.listdir(path):
            if extra != "config.json":
                os.remove(os.path.join(path, extra))
        save_file({k: v.astype(np.float32) for k, v in tensors.items()},
                  os.path.join(path, "model.safetensors"))
        expected[name] = {"layer": layer, "expert": expert, "weights": {
            k: {"rows": int(v.shape[0]), "cols": int(v.shape[1]),
                "row_sums": [float(s) for s in v.astype(np.float32).astype(np.float64).sum(axis=1)]}
            for k, v in cut.items()}}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"made_by": "tests/families/make_stacked_checkpoints.py", "checkpoints": expected},
                  f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"make_stacked_checkpoints: {len(expected)} checkpoints in {out}")


if __name__ == "__main__":
    main()
