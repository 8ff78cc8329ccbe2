#!/usr/bin/env python3
"""Writes the tiny random checkpoints of tests/families/checkpoints/ with transformers itself.

    pip install torch transformers   # torch: several GB, so not a CI dependency
    python3 tests/families/make_tiny_checkpoints.py tests/families/checkpoints

Each is a model of two decoder layers and hidden size 64 built by transformers from its own
config class (random weights, seed 0) and saved by save_pretrained as safetensors: the tensor
names and fused layouts (GPT-NeoX's and Falcon's query_key_value, Phi-3's qkv_proj and
gate_up_proj, GLM's gate_up_proj, GPTBigCode's c_attn, GPT-2's Conv1D c_attn stored [in, out], per-expert MoE tensors, Gemma-3's
language_model. prefix, Qwen3's o_proj.bias) are exactly what transformers writes.
tests/test_family_checkpoints.cpp runs `fusebench --weights=DIR --verify --tokens=1` on each.
Regenerate after changing the list below, and commit the result (about 5 MB).
"""
import json
import os
import shutil
import sys

import torch
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

TOKENS = dict(vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2)
SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64, **TOKENS)

CHECKPOINTS = {
    "llama": ("llama", dict(SMALL, num_key_value_heads=2, head_dim=16)),
    "qwen3_o_bias": ("qwen3", dict(SMALL, num_key_value_heads=2, head_dim=16,
                                   attention_bias=True)),
    "phi3": ("phi3", dict(SMALL, num_key_value_heads=2)),
    "glm4": ("glm4", dict(SMALL, num_key_value_heads=2, head_dim=16)),
    "gpt_neox": ("gpt_neox", dict(SMALL)),
    "persimmon": ("persimmon", dict(SMALL)),
    "falcon_40b_like": ("falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       num_kv_heads=2, new_decoder_architecture=True, **TOKENS)),
    "falcon_7b_like": ("falcon", dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      multi_query=True, **TOKENS)),
    "gpt2": ("gpt2", dict(n_embd=64, n_layer=2, n_head=4, n_positions=64, **TOKENS)),
    "gpt_bigcode": ("gpt_bigcode", dict(n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                        **TOKENS)),
    "qwen3_moe": ("qwen3_moe", dict(SMALL, num_key_value_heads=2, head_dim=16,
                                    moe_intermediate_size=32, num_experts=4,
                                    num_experts_per_tok=2)),
    "glm4_moe": ("glm4_moe", dict(SMALL, num_key_value_heads=2, head_dim=16, n_routed_experts=4,
                                  num_experts_per_tok=2, moe_intermediate_size=32,
                                  first_k_dense_replace=1)),
    # PhimoeConfig's default attention_bias=false: no q/k/v/o biases saved, which vLLM's
    # PhiMoEAttention always builds; tests/test_family_checkpoints.cpp expects the refusal.
    "phimoe": ("phimoe", dict(SMALL, num_key_value_heads=2, num_local_experts=4,
                              num_experts_per_tok=2)),
    "gemma3": ("gemma3", dict(
        text_config=dict(SMALL, num_key_value_heads=2, head_dim=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14))),
}


def split_as_transformers_does(name, model_type, cfg, layer):
    """Layer 0's logical q/k/v (and fused gate/up) weights, cut from the stored tensors the way
    transformers' own forward() cuts their outputs (each line names the module it follows)."""
    params = {n: p.detach() for n, p in layer.named_parameters()}
    text = cfg.get_text_config()
    heads = text.num_attention_heads
    hd = text.hidden_size // heads
    out = {}
    if model_type in ("gpt_neox", "persimmon"):
        # GPTNeoXAttention / PersimmonAttention: view(..., heads, 3 * head_dim) -> chunk(3)
        key = "attention.query_key_value" if model_type == "gpt_neox" else "self_attn.query_key_value"
        for part, b in (("weight", "w"), ("bias", "b")):
            t = params[f"{key}.{part}"]
            t = t.view(heads, 3, hd, -1) if part == "weight" else t.view(heads, 3, hd)
            for i, qkv in enumerate("qkv"):
                out[f"{b}_{qkv}"] = t[:, i].reshape(heads * hd, -1)
    elif model_type == "falcon":
        # FalconAttention._split_heads: view(..., kv_heads, heads / kv_heads + 2, head_dim);
        # multi_query: view(..., heads + 2, head_dim) (one group).
        kv = text.num_kv_heads if text.new_decoder_architecture else 1
        w = params["self_attention.query_key_value.weight"].view(kv, heads // kv + 2, hd, -1)
        out["w_q"] = w[:, :-2].reshape(heads * hd, -1)
        out["w_k"] = w[:, -2].reshape(kv * hd, -1)
        out["w_v"] = w[:, -1].reshape(kv * hd, -1)
    elif model_type == "gpt2":
        # GPT2Attention: c_attn(x).split(embed_dim, dim=2); Conv1D stores its weight [in, out]
        w = params["attn.c_attn.weight"].t()
        out["w_q"], out["w_k"], out["w_v"] = w.split(heads * hd, dim=0)
        out["b_q"], out["b_k"], out["b_v"] = params["attn.c_attn.bias"].reshape(-1, 1).split(
            heads * hd, dim=0)
        out["w_o"] = params["attn.c_proj.weight"].t()
    elif model_type == "gpt_bigcode":
        # GPTBigCodeAttention: c_attn(x).split((embed_dim, kv_dim, kv_dim)) (multi_query)
        w = params["attn.c_attn.weight"]
        out["w_q"], out["w_k"], out["w_v"] = w.split((heads * hd, hd, hd), dim=0)
    elif model_type == "phi3":
        # Phi3Attention: qkv[..., :query_pos], [query_pos : query_pos + kv], [query_pos + kv :]
        kv = text.num_key_value_heads * hd
        w = params["self_attn.qkv_proj.weight"]
        out["w_q"], out["w_k"], out["w_v"] = w.split((heads * hd, kv, kv), dim=0)
        # Phi3MLP: gate_up_proj(x).chunk(2, dim=-1): gate first
        out["w_gate"], out["w_up"] = params["mlp.gate_up_proj.weight"].chunk(2, dim=0)
    elif model_type == "glm4":
        # Glm4MLP: gate_up_proj(x).chunk(2, dim=-1)
        out["w_gate"], out["w_up"] = params["mlp.gate_up_proj.weight"].chunk(2, dim=0)
    else:
        attn = [n for n in params if n.endswith("q_proj.weight")][0]
        out["w_q"] = params[attn]
        out["w_k"] = params[attn.replace("q_proj", "k_proj")]
        out["w_v"] = params[attn.replace("q_proj", "v_proj")]
        if attn.replace("q_proj.weight", "o_proj.bias") in params:
            out["o_proj.bias (stored, not run)"] = params[attn.replace("q_proj.weight", "o_proj.bias")].reshape(-1, 1)
    return {k: {"rows": int(v.shape[0]), "row_sums": [float(x) for x in v.float().sum(dim=1)]}
            for k, v in out.items()}


def decoder_layer0(model, n):
    for mod in model.modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == n:
            return mod[0]
    raise RuntimeError("no decoder layers")


def main():
    out = sys.argv[1]
    expected = {}
    for name, (model_type, kwargs) in CHECKPOINTS.items():
        torch.manual_seed(0)
        cfg = CONFIG_MAPPING[model_type](**kwargs)
        if model_type == "gemma3":
            from transformers import Gemma3ForConditionalGeneration
            model = Gemma3ForConditionalGeneration(cfg)
        else:
            model = AutoModelForCausalLM.from_config(cfg)
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        model.save_pretrained(path, safe_serialization=True)
        for extra in os.listdir(path):  # generation_config.json is not read
            if extra not in ("config.json", "model.safetensors"):
                os.remove(os.path.join(path, extra))
        text = cfg.get_text_config()
        expected[name] = split_as_transformers_does(
            name, model_type, cfg, decoder_layer0(model, text.num_hidden_layers))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"transformers": __import__("transformers").__version__, "layer": 0,
                   "checkpoints": expected}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"make_tiny_checkpoints: {len(CHECKPOINTS)} checkpoints in {out}")


if __name__ == "__main__":
    main()
