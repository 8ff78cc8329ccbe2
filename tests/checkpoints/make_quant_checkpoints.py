#!/usr/bin/env python3
"""Writes tiny quantized Hugging Face checkpoints as they are published, and what they hold.

    make_quant_checkpoints.py OUTDIR

OUTDIR gets one model directory per format (config.json + model.safetensors) and expected.json:
per directory, the spec a run uses, each projection's scale tensors, and sample elements of each
logical weight (its stored code and its dequantized value, code * scale, computed here in float64
with ml_dtypes' float8_e4m3fn, independently of fusebench). Deterministic.

The formats (one qwen3-like decoder layer, hidden 256, so that 128x128 blocks fit):
  fp8-block     quant_method fp8, weight_block_size [128, 128], dynamic activations:
                F8_E4M3 weights and F32 weight_scale_inv [ceil(N/128), ceil(K/128)]
                (DeepSeek-V3, Qwen3-*-FP8).
  fp8-tensor    quant_method fp8, activation_scheme static: one F32 weight_scale [] per
                projection and one input_scale [] (k and v much smaller than q, so vLLM's
                max-scale requantization of the fused layer loses on k and v).
  ct-fp8        compressed-tensors, float-quantized: weights channel ([N, 1] BF16 scales),
                input_activations token, dynamic (llm-compressor's FP8_DYNAMIC).
  ct-int8       compressed-tensors, int-quantized: I8 weights, channel ([N, 1] F32 scales),
                input_activations token, dynamic (W8A8 INT8).
fp8-block-kv64 is fp8-block with 4 heads of 64 (k and v 64 rows: vLLM refuses the fused q/k/v).
lm_head stays bf16 (the ignore lists say so), as do the norms and the embeddings.
"""
import json
import os
import sys

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

HIDDEN, HEADS, KV, HEAD_DIM, INTER = 256, 2, 1, 128, 384
FP8 = ml_dtypes.float8_e4m3fn
BF16 = ml_dtypes.bfloat16


def config(quantization_config, heads=HEADS, head_dim=HEAD_DIM):
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": HIDDEN, "num_attention_heads": heads, "num_key_value_heads": KV,
        "head_dim": head_dim, "intermediate_size": INTER, "num_hidden_layers": 1,
        "vocab_size": 16, "torch_dtype": "bfloat16", "quantization_config": quantization_config,
    }


def projections(rng, heads=HEADS, head_dim=HEAD_DIM):
    """Layer 0's projection weights [N, K] (float64), k and v scaled down against q."""
    HEADS, HEAD_DIM = heads, head_dim  # noqa: N806
    w = lambda rows, cols, s=1.0: s * rng.standard_normal((rows, cols)) / np.sqrt(cols)  # noqa
    p = "model.layers.0."
    return {
        p + "self_attn.q_proj.weight": ("w_q", w(HEADS * HEAD_DIM, HIDDEN)),
        p + "self_attn.k_proj.weight": ("w_k", w(KV * HEAD_DIM, HIDDEN, 0.37)),
        p + "self_attn.v_proj.weight": ("w_v", w(KV * HEAD_DIM, HIDDEN, 0.21)),
        p + "self_attn.o_proj.weight": ("w_o", w(HIDDEN, HEADS * HEAD_DIM)),
        p + "mlp.gate_proj.weight": ("w_gate", w(INTER, HIDDEN)),
        p + "mlp.up_proj.weight": ("w_up", w(INTER, HIDDEN, 0.5)),
        p + "mlp.down_proj.weight": ("w_down", w(HIDDEN, INTER)),
    }


def fp8_codes(values):
    """Round to e4m3fn (nearest even), saturating at +-448 as vLLM clamps (amax / 448 rounded to
    float32 may put the largest element a hair beyond 448)."""
    assert np.abs(values).max() <= 448.0 * (1 + 1e-6)
    return np.clip(values, -448.0, 448.0).astype(np.float32).astype(FP8)


def quantize(w, fmt):
    """(codes, scale tensor, per-element scale [N, K] float64) as the format stores them."""
    n, k = w.shape
    if fmt == "fp8-block":
        grid = np.zeros(((n + 127) // 128, (k + 127) // 128), np.float32)
        for i in range(grid.shape[0]):
            for j in range(grid.shape[1]):
                grid[i, j] = np.float32(np.abs(w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]).max() / 448.0)
        full = np.repeat(np.repeat(grid.astype(np.float64), 128, 0), 128, 1)[:n, :k]
        return fp8_codes(w / full), grid, full
    if fmt == "fp8-tensor":
        s = np.float32(np.abs(w).max() / 448.0)
        return fp8_codes(w / float(s)), np.array(s, np.float32), np.full(w.shape, float(s))
    if fmt == "ct-fp8":
        s = (np.abs(w).max(axis=1, keepdims=True) / 448.0).astype(np.float32).astype(BF16)
        full = np.broadcast_to(s.astype(np.float64), w.shape)
        return fp8_codes(np.clip(w / full, -448, 448)), s, full  # bf16 scales round down too
    if fmt == "ct-int8":
        s = (np.abs(w).max(axis=1, keepdims=True) / 127.0).astype(np.float32)
        full = np.broadcast_to(s.astype(np.float64), w.shape)
        return np.clip(np.rint(w / full), -127, 127).astype(np.int8), s, full
    raise ValueError(fmt)


QUANT_CONFIGS = {
    "fp8-block": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                  "weight_block_size": [128, 128]},
    "fp8-tensor": {"quant_method": "fp8", "activation_scheme": "static", "ignored_layers": ["lm_head"]},
    "ct-fp8": {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True,
                        "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "float", "strategy": "token",
                                  "symmetric": True, "dynamic": True}}}},
    "ct-int8": {
        "quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
        "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True,
                        "dynamic": False},
            "input_activations": {"num_bits": 8, "type": "int", "strategy": "token",
                                  "symmetric": True, "dynamic": True}}}},
}
SPECS = {"fp8-block": "fp8:block", "fp8-tensor": "fp8:tensor:static", "ct-fp8": "fp8:channel",
         "ct-int8": "int8:channel"}
SCALE_SUFFIX = {"fp8-block": "weight_scale_inv", "fp8-tensor": "weight_scale",
                "ct-fp8": "weight_scale", "ct-int8": "weight_scale"}


def write(out, fmt, seed, heads=HEADS, head_dim=HEAD_DIM, name=None):
    rng = np.random.default_rng(seed)
    d = os.path.join(out, name or fmt)
    os.makedirs(d, exist_ok=True)
    tensors = {"model.embed_tokens.weight": rng.standard_normal((16, HIDDEN)).astype(BF16),
               "model.norm.weight": np.ones(HIDDEN, BF16),
               "lm_head.weight": rng.standard_normal((16, HIDDEN)).astype(BF16)}
    p = "model.layers.0."
    for norm in ("input_layernorm", "post_attention_layernorm"):
        tensors[p + norm + ".weight"] = np.ones(HIDDEN, BF16)
    for norm in ("q_norm", "k_norm"):
        tensors[p + "self_attn." + norm + ".weight"] = np.ones(head_dim, BF16)
    expected = {"spec": SPECS[fmt], "scales": {}, "samples": {}}
    for name, (logical, w) in projections(rng, heads, head_dim).items():
        codes, scale, full = quantize(w, fmt)
        stem = name[:-len(".weight")]
        tensors[name] = codes
        tensors[stem + "." + SCALE_SUFFIX[fmt]] = scale
        expected["scales"][logical] = stem + "." + SCALE_SUFFIX[fmt]
        if fmt == "fp8-tensor":  # a static input scale per projection; q/k/v's differ
            tensors[stem + ".input_scale"] = np.array(0.01 + 0.001 * len(expected["scales"]), np.float32)
            expected["scales"][logical] += "; input_scale " + stem + ".input_scale"
            expected.setdefault("input_scales", {})[logical] = float(tensors[stem + ".input_scale"])
        value = codes.astype(np.float64) * full  # the dequantized weights
        n, k = w.shape
        picks = [(0, 0), (n - 1, k - 1), (n // 2, 129 % k), (min(130, n - 1), 3)]
        expected["samples"][logical] = [
            {"row": r, "col": c, "code": int(codes.view(np.uint8)[r, c]), "value": float(value[r, c])}
            for r, c in picks]
    save_file(tensors, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config(QUANT_CONFIGS[fmt], heads, head_dim), f, indent=2)
    return expected


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = {fmt: write(out, fmt, seed) for seed, fmt in enumerate(QUANT_CONFIGS, start=29)}
    # Block FP8 with 64-wide k and v (4 heads of 64): split runs, the fused q/k/v layer is what
    # vLLM's validate_fp8_block_shape refuses (k's 64 rows are not whole 128-row blocks).
    manifest["fp8-block-kv64"] = write(out, "fp8-block", 7, heads=4, head_dim=64,
                                       name="fp8-block-kv64")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(manifest, f, indent=2)


if __name__ == "__main__":
    main()
