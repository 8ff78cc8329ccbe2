#!/usr/bin/env python3
"""Writes the small Hugging Face checkpoints tests/test_checkpoints.cpp reads, and what it expects.

    make_checkpoints.py OUTDIR

OUTDIR gets one model directory per case (config.json + safetensors files), hostile/ (files and
directories the reader must refuse), expected.json (the manifest) and expected.bin (float32
values the manifest points into, little-endian). Deterministic: the same bytes on every run.

The expectations are computed here, independently of fusebench: the values each tensor holds
(bf16 rounding written out below, fp16 by numpy), the logical tensors of a layer (Phi-3's fused
tensors split by vLLM's shard offsets), and every tensor-parallel rank's merged parameters,
built by a transcription of vLLM's weight loaders (QKVParallelLinear, MergedColumnParallelLinear,
RowParallelLinear in vllm/model_executor/layers/linear.py). Files are written by our own small
writer (numpy has no bfloat16); when the `safetensors` package is installed, every file is read
back with it, the hostile files must be refused by it too, and one more checkpoint is written by
it (official/), so the reader is checked against the reference implementation's files.

The MoE and MLA checkpoints (Qwen3-MoE with a dense layer 0, Qwen2-MoE with a shared expert and
q/k/v bias, Mixtral's block_sparse_moe w1/w3/w2, DeepSeek-V3's MLA with a dense layer 0) carry
each layer's logical tensors for every expert, and each rank's w13/w2 as a transcription of
vLLM's FusedMoE weight loader (_load_w13, _load_w2 in fused_moe/layer.py) builds them.
hostile/cli/ holds the hostile files again as model directories (config.json beside them), for
the command-line tests; cli/nan_in_layer1_k_proj/ is a valid checkpoint with one NaN weight, so
the command-line tests can see which layer's values a run computes on.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

try:
    import safetensors
    import safetensors.numpy
    from safetensors import safe_open
except ImportError as e:  # the official/ checkpoint and the cross-checks are then skipped
    safetensors = None
    OFFICIAL_MISSING = f"the safetensors package is not installed ({e}); pip install safetensors"
else:
    OFFICIAL_MISSING = None


# ---------------------------------------------------------------- values and the file format
def bf16_bits(values):
    """float32 -> bfloat16 bits, round to nearest even (no NaN in our data)."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def store(values, dtype):
    """(raw little-endian bytes, the float32 values as stored) of `values` in `dtype`."""
    values = np.asarray(values, dtype=np.float32)
    if dtype == "F32":
        return values.astype("<f4").tobytes(), values.copy()
    if dtype == "F16":
        h = values.astype(np.float16)
        return h.astype("<f2").tobytes(), h.astype(np.float32)
    if dtype == "BF16":
        b = bf16_bits(values)
        return b.astype("<u2").tobytes(), bf16_values(b)
    raise ValueError(dtype)


def header_bytes(header):
    text = json.dumps(header, separators=(",", ":")).encode()
    return text + b" " * ((8 - len(text) % 8) % 8)  # the reference writer pads to 8 bytes


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in this order."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = header_bytes(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def write_raw(path, header, data=b"", length=None):
    """A file with exactly this header (dict or bytes) and data; `length` overrides N."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text) if length is None else length) + text + data)


# ---------------------------------------------------------------- the models
MODELS = {
    # Qwen3-like GQA: q_size = 8*16 = 128 != hidden 64; tp 4 and 8 replicate kv heads.
    "qwen3_gqa": dict(model_type="qwen3", hidden=64, heads=8, kv=2, head_dim=16, inter=96,
                      layers=2, dtype="BF16", layout="single", bias=False, fused=False, tp=[1, 2, 4, 8]),
    # Qwen2-like: q/k/v bias in every layer (vLLM hard-codes it), o_proj without.
    "qwen2_bias": dict(model_type="qwen2", hidden=48, heads=4, kv=2, head_dim=12, inter=64,
                       layers=1, dtype="F16", layout="single", bias=True, fused=False, tp=[1, 2, 4]),
    # Phi-3-like: qkv_proj and gate_up_proj stored fused.
    "phi3_fused": dict(model_type="phi3", hidden=64, heads=4, kv=2, head_dim=16, inter=80,
                       layers=1, dtype="BF16", layout="single", bias=False, fused=True, tp=[1, 2, 4]),
    # Llama-like in fp32, sharded over two files with an index; layer 1 spans both files.
    "llama_sharded": dict(model_type="llama", hidden=32, heads=4, kv=4, head_dim=8, inter=48,
                          layers=2, dtype="F32", layout="index", bias=False, fused=False, tp=[1, 2, 4]),
    # The same tensors in two files and no index.
    "llama_multifile": dict(model_type="llama", hidden=32, heads=4, kv=4, head_dim=8, inter=48,
                            layers=2, dtype="F32", layout="multi", bias=False, fused=False, tp=[1, 2]),
}


# MoE and MLA (docs/models.md): the tensors vLLM's MoE classes load, expert by expert.
MOE_MODELS = {
    # Qwen3-MoE: layer 0 dense (mlp_only_layers), layer 1 MoE; q_size 32 = hidden.
    "qwen3_moe": dict(model_type="qwen3_moe", hidden=32, heads=4, kv=2, head_dim=8, inter=40,
                      moe_inter=24, experts=4, layers=2, dtype="BF16", bias=False, dense_layers=[0],
                      tp=[1, 2]),
    # Qwen2-MoE: q/k/v bias, experts plus one shared expert, fp32 (the CPU runs it as stored).
    "qwen2_moe_shared": dict(model_type="qwen2_moe", hidden=32, heads=4, kv=2, head_dim=8, inter=48,
                             moe_inter=16, shared=32, experts=4, layers=1, dtype="F32", bias=True,
                             dense_layers=[], tp=[1, 2]),
    # Mixtral: block_sparse_moe.experts.E.w1 (gate), w3 (up), w2 (down); every layer MoE.
    "mixtral_moe": dict(model_type="mixtral", hidden=32, heads=4, kv=2, head_dim=8, inter=40,
                        moe_inter=40, experts=4, layers=1, dtype="BF16", bias=False, dense_layers=[],
                        tp=[1, 2]),
    # DeepSeek-V3: MLA (q_a_proj, kv_a_proj_with_mqa), layer 0 dense (first_k_dense_replace=1),
    # layer 1 routed experts and shared_experts (n_shared_experts=2: 2 * moe_intermediate_size).
    "deepseek_mla": dict(model_type="deepseek_v3", hidden=32, heads=4, kv=4, head_dim=16, inter=48,
                         moe_inter=16, shared=32, experts=4, layers=2, dtype="BF16", bias=False,
                         dense_layers=[0], q_lora=16, kv_lora=24, rope=8, nope=8, v_head=8, tp=[1, 2]),
}


def moe_names(spec):
    """(experts prefix, (gate, up, down) names, shared prefix or None) of a layer, after vLLM."""
    t = spec["model_type"]
    if t == "mixtral":
        return "block_sparse_moe.experts.", ("w1", "w3", "w2"), None
    shared = {"qwen2_moe": "mlp.shared_expert.", "deepseek_v3": "mlp.shared_experts."}.get(t)
    return "mlp.experts.", ("gate_proj", "up_proj", "down_proj"), shared


def moe_tensors(spec, rng):
    """The checkpoint's tensors of an MoE/MLA model as (name, float32 values), in file order."""
    h, d, H, KV = spec["hidden"], spec["head_dim"], spec["heads"], spec["kv"]
    w = lambda rows, cols: rng.standard_normal((rows, cols)) / np.sqrt(cols)  # noqa: E731
    mla = spec["model_type"] == "deepseek_v3"
    experts, (g, u, dn), shared = moe_names(spec)
    out = [("model.embed_tokens.weight", rng.standard_normal((16, h)))]
    for n in range(spec["layers"]):
        p = f"model.layers.{n}."
        out.append((p + "input_layernorm.weight", 1 + 0.1 * rng.standard_normal(h)))
        if mla:
            ql, kvl, rope, nope, vh = spec["q_lora"], spec["kv_lora"], spec["rope"], spec["nope"], spec["v_head"]
            out.append((p + "self_attn.q_a_proj.weight", w(ql, h)))
            out.append((p + "self_attn.q_a_layernorm.weight", 1 + 0.1 * rng.standard_normal(ql)))
            out.append((p + "self_attn.q_b_proj.weight", w(H * (nope + rope), ql)))
            out.append((p + "self_attn.kv_a_proj_with_mqa.weight", w(kvl + rope, h)))
            out.append((p + "self_attn.kv_a_layernorm.weight", 1 + 0.1 * rng.standard_normal(kvl)))
            out.append((p + "self_attn.kv_b_proj.weight", w(H * (nope + vh), kvl)))
            out.append((p + "self_attn.o_proj.weight", w(h, H * vh)))
        else:
            for s_, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
                out.append((p + f"self_attn.{s_}_proj.weight", w(rows, h)))
                if spec["bias"]:
                    out.append((p + f"self_attn.{s_}_proj.bias", 0.5 * rng.standard_normal(rows)))
            out.append((p + "self_attn.o_proj.weight", w(h, H * d)))
        out.append((p + "post_attention_layernorm.weight", 1 + 0.1 * rng.standard_normal(h)))
        if n in spec["dense_layers"]:
            for name in ("gate_proj", "up_proj"):
                out.append((p + f"mlp.{name}.weight", w(spec["inter"], h)))
            out.append((p + "mlp.down_proj.weight", w(h, spec["inter"])))
            continue
        I = spec["moe_inter"]
        router = "block_sparse_moe.gate.weight" if spec["model_type"] == "mixtral" else "mlp.gate.weight"
        out.append((p + router, w(spec["experts"], h)))  # the router: the moe op's
        for e in range(spec["experts"]):
            out.append((p + f"{experts}{e}.{g}.weight", w(I, h)))
            out.append((p + f"{experts}{e}.{u}.weight", w(I, h)))
            out.append((p + f"{experts}{e}.{dn}.weight", w(h, I)))
        if shared:
            S = spec["shared"]
            out.append((p + shared + "gate_proj.weight", w(S, h)))
            out.append((p + shared + "up_proj.weight", w(S, h)))
            out.append((p + shared + "down_proj.weight", w(h, S)))
            if spec["model_type"] == "qwen2_moe":
                out.append((p + "mlp.shared_expert_gate.weight", w(1, h)))
    out.append(("model.norm.weight", 1 + 0.1 * rng.standard_normal(h)))
    out.append(("lm_head.weight", rng.standard_normal((16, h))))
    return out


def moe_config_json(spec):
    t = spec["model_type"]
    cfg = {"architectures": [{"qwen3_moe": "Qwen3MoeForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
                              "mixtral": "MixtralForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM"}[t]],
           "model_type": t, "hidden_size": spec["hidden"], "num_attention_heads": spec["heads"],
           "num_key_value_heads": spec["kv"], "intermediate_size": spec["inter"],
           "num_hidden_layers": spec["layers"], "vocab_size": 16, "hidden_act": "silu",
           "num_experts_per_tok": 2,
           "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[spec["dtype"]]}
    if t == "qwen3_moe":
        cfg.update(head_dim=spec["head_dim"], num_experts=spec["experts"],
                   moe_intermediate_size=spec["moe_inter"], decoder_sparse_step=1,
                   mlp_only_layers=spec["dense_layers"], attention_bias=False)
    elif t == "qwen2_moe":
        # norm_topk_prob: Qwen2MoeConfig writes it (false in Qwen1.5-MoE); the moe op's rule reads it.
        cfg.update(num_experts=spec["experts"], moe_intermediate_size=spec["moe_inter"],
                   shared_expert_intermediate_size=spec["shared"], decoder_sparse_step=1,
                   mlp_only_layers=spec["dense_layers"], norm_topk_prob=False)
    elif t == "mixtral":
        cfg.update(num_local_experts=spec["experts"])
    else:
        cfg.update(q_lora_rank=spec["q_lora"], kv_lora_rank=spec["kv_lora"],
                   qk_rope_head_dim=spec["rope"], qk_nope_head_dim=spec["nope"],
                   v_head_dim=spec["v_head"], n_routed_experts=spec["experts"],
                   moe_intermediate_size=spec["moe_inter"], n_shared_experts=spec["shared"] // spec["moe_inter"],
                   first_k_dense_replace=len(spec["dense_layers"]), moe_layer_freq=1)
    return json.dumps(cfg, indent=2) + "\n"


def moe_logical(spec, tensors, layer, expert):
    """The logical tensors of one layer (routed experts: expert `expert`), as the mapping names them."""
    p = f"model.layers.{layer}."
    out = {}
    if spec["model_type"] == "deepseek_v3":
        out["w_q_a"] = tensors[p + "self_attn.q_a_proj.weight"]
        out["w_kv_a"] = tensors[p + "self_attn.kv_a_proj_with_mqa.weight"]
    else:
        for s_ in "qkv":
            out["w_" + s_] = tensors[p + f"self_attn.{s_}_proj.weight"]
            if spec["bias"]:
                out["b_" + s_] = tensors[p + f"self_attn.{s_}_proj.bias"]
        out["w_o"] = tensors[p + "self_attn.o_proj.weight"]
    if layer in spec["dense_layers"]:
        for k in ("gate", "up", "down"):
            out["w_" + k] = tensors[p + f"mlp.{k}_proj.weight"]
        return out
    experts, names, shared = moe_names(spec)
    for k, name in zip(("gate", "up", "down"), names):
        out["w_expert_" + k] = tensors[p + f"{experts}{expert}.{name}.weight"]
        if shared:
            out["w_shared_expert_" + k] = tensors[p + f"{shared}{k}_proj.weight"]
    if spec["model_type"] == "qwen2_moe" and shared:
        # Qwen2MoeSparseMoeBlock.shared_expert_gate, Linear(hidden, 1): the moe op's sigmoid gate.
        out["w_shared_expert_sigmoid_gate"] = tensors[p + "mlp.shared_expert_gate.weight"]
    return out


class FusedMoE:
    """One expert's w13 [2 I/tp, hidden] and w2 [hidden, I/tp] on one rank, loaded as
    vllm/model_executor/layers/fused_moe/layer.py's weight_loader does (_load_w13, _load_w2)."""

    def __init__(self, hidden, intermediate, tp_size, tp_rank):
        assert intermediate % tp_size == 0
        self.tp_rank = tp_rank
        self.w13 = np.full((2 * intermediate // tp_size, hidden), np.nan, np.float32)
        self.w2 = np.full((hidden, intermediate // tp_size), np.nan, np.float32)

    def load_w13(self, loaded_weight, shard_id):  # w1 (gate) or w3 (up); shard_dim 0
        shard_size = self.w13.shape[0] // 2
        loaded_weight = loaded_weight[shard_size * self.tp_rank:shard_size * (self.tp_rank + 1)]
        if shard_id == "w1":
            self.w13[:shard_size] = loaded_weight
        else:
            self.w13[shard_size:2 * shard_size] = loaded_weight

    def load_w2(self, loaded_weight):  # shard_dim 1
        shard_size = self.w2.shape[1]
        self.w2[...] = loaded_weight[:, shard_size * self.tp_rank:shard_size * (self.tp_rank + 1)]


def write_moe_model(out, name, spec, blob, rng):
    root = os.path.join(out, name)
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as f:
        f.write(moe_config_json(spec))
    stored, files = {}, []
    for tname, values in moe_tensors(spec, rng):
        raw, value = store(values, spec["dtype"])
        stored[tname] = value
        files.append((tname, spec["dtype"], value.shape, raw))
    write_safetensors(os.path.join(root, "model.safetensors"), files, {"format": "pt"})
    moe_layers = [n for n in range(spec["layers"]) if n not in spec["dense_layers"]]
    experts, (g, u, dn), _ = moe_names(spec)
    tp = {}
    for size in spec["tp"]:
        ranks = []
        for r in range(size):
            m = FusedMoE(spec["hidden"], spec["moe_inter"], size, r)
            p = f"model.layers.{moe_layers[0]}."
            m.load_w13(stored[p + f"{experts}1.{g}.weight"], "w1")  # expert 1: not the default
            m.load_w13(stored[p + f"{experts}1.{u}.weight"], "w3")
            m.load_w2(stored[p + f"{experts}1.{dn}.weight"])
            assert not np.isnan(m.w13).any() and not np.isnan(m.w2).any()
            ranks.append({"w13": blob.add(m.w13), "w2": blob.add(m.w2)})
        tp[str(size)] = ranks
    return {
        "dir": name, "files": ["model.safetensors"], "layout": "single", "model_type": spec["model_type"],
        "dtype": spec["dtype"], "moe": True, "experts": spec["experts"], "dense_layers": spec["dense_layers"],
        "moe_layers": moe_layers,
        "tensors": {t: blob.add(v) for t, v in stored.items()},
        # logical[layer][expert]: every expert of an MoE layer, expert 0 of a dense one.
        "logical": {str(n): {str(e): {k: blob.add(v) for k, v in moe_logical(spec, stored, n, e).items()}
                             for e in (range(spec["experts"]) if n in moe_layers else [0])}
                    for n in range(spec["layers"])},
        "tp_layer": moe_layers[0], "tp_expert": 1, "tp": tp,
    }


def hf_tensors(spec, rng):
    """The checkpoint's tensors as (name, float32 values before storing), in file order."""
    h, d, H, KV, inter = spec["hidden"], spec["head_dim"], spec["heads"], spec["kv"], spec["inter"]
    out = [("model.embed_tokens.weight", rng.standard_normal((16, h)))]
    for n in range(spec["layers"]):
        p = f"model.layers.{n}."
        out.append((p + "input_layernorm.weight", 1 + 0.1 * rng.standard_normal(h)))
        w = lambda rows, cols: rng.standard_normal((rows, cols)) / np.sqrt(cols)  # noqa: E731
        if spec["fused"]:
            out.append((p + "self_attn.qkv_proj.weight", w((H + 2 * KV) * d, h)))
        else:
            out.append((p + "self_attn.q_proj.weight", w(H * d, h)))
            out.append((p + "self_attn.k_proj.weight", w(KV * d, h)))
            out.append((p + "self_attn.v_proj.weight", w(KV * d, h)))
        if spec["bias"]:
            for s, rows in (("q", H * d), ("k", KV * d), ("v", KV * d)):
                out.append((p + f"self_attn.{s}_proj.bias", 0.5 * rng.standard_normal(rows)))
        if spec["model_type"] == "qwen3":
            out.append((p + "self_attn.q_norm.weight", 1 + 0.1 * rng.standard_normal(d)))
            out.append((p + "self_attn.k_norm.weight", 1 + 0.1 * rng.standard_normal(d)))
        out.append((p + "self_attn.o_proj.weight", w(h, H * d)))
        out.append((p + "post_attention_layernorm.weight", 1 + 0.1 * rng.standard_normal(h)))
        if spec["fused"]:
            out.append((p + "mlp.gate_up_proj.weight", w(2 * inter, h)))
        else:
            out.append((p + "mlp.gate_proj.weight", w(inter, h)))
            out.append((p + "mlp.up_proj.weight", w(inter, h)))
        out.append((p + "mlp.down_proj.weight", w(h, inter)))
    out.append(("model.norm.weight", 1 + 0.1 * rng.standard_normal(h)))
    out.append(("lm_head.weight", rng.standard_normal((16, h))))
    return out


def config_json(spec):
    cfg = {
        "architectures": [{"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "phi3": "Phi3ForCausalLM", "llama": "LlamaForCausalLM"}[spec["model_type"]]],
        "model_type": spec["model_type"],
        "hidden_size": spec["hidden"],
        "num_attention_heads": spec["heads"],
        "num_key_value_heads": spec["kv"],
        "head_dim": spec["head_dim"],
        "intermediate_size": spec["inter"],
        "num_hidden_layers": spec["layers"],
        "vocab_size": 16,
        "torch_dtype": {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[spec["dtype"]],
    }
    return json.dumps(cfg, indent=2) + "\n"


def logical_tensors(spec, tensors, layer):
    """fusebench's logical tensors of one layer, taken from the HF tensors as vLLM does."""
    p = f"model.layers.{layer}."
    H, KV, d, inter = spec["heads"], spec["kv"], spec["head_dim"], spec["inter"]
    out = {}
    if spec["fused"]:
        # QKVParallelLinear.weight_loader, loaded_shard_id=None: (q, 0, H*d), (k, H*d, KV*d),
        # (v, (H+KV)*d, KV*d); MergedColumnParallelLinear: offsets by output_sizes [I, I].
        qkv = tensors[p + "self_attn.qkv_proj.weight"]
        out["w_q"], out["w_k"], out["w_v"] = qkv[: H * d], qkv[H * d:(H + KV) * d], qkv[(H + KV) * d:]
        gu = tensors[p + "mlp.gate_up_proj.weight"]
        out["w_gate"], out["w_up"] = gu[:inter], gu[inter:]
    else:
        for s in "qkv":
            out["w_" + s] = tensors[p + f"self_attn.{s}_proj.weight"]
        out["w_gate"] = tensors[p + "mlp.gate_proj.weight"]
        out["w_up"] = tensors[p + "mlp.up_proj.weight"]
    if spec["bias"]:
        for s in "qkv":
            out["b_" + s] = tensors[p + f"self_attn.{s}_proj.bias"]
    out["w_o"] = tensors[p + "self_attn.o_proj.weight"]
    out["w_down"] = tensors[p + "mlp.down_proj.weight"]
    return out


# ------------------------------------------- vLLM's weight loaders, transcribed (linear.py)
class QKVParallelLinear:
    def __init__(self, hidden, head_size, total_num_heads, total_num_kv_heads, tp_size, tp_rank, bias):
        self.head_size, self.tp_rank = head_size, tp_rank
        self.total_num_heads, self.total_num_kv_heads = total_num_heads, total_num_kv_heads
        assert total_num_heads % tp_size == 0
        self.num_heads = total_num_heads // tp_size
        if tp_size >= total_num_kv_heads:
            self.num_kv_heads = 1
            assert tp_size % total_num_kv_heads == 0
            self.num_kv_head_replicas = tp_size // total_num_kv_heads
        else:
            assert total_num_kv_heads % tp_size == 0
            self.num_kv_heads = total_num_kv_heads // tp_size
            self.num_kv_head_replicas = 1
        rows = (self.num_heads + 2 * self.num_kv_heads) * head_size
        self.weight = np.full((rows, hidden), np.nan, np.float32)
        self.bias = np.full(rows, np.nan, np.float32) if bias else None

    def weight_loader(self, param, loaded_weight, loaded_shard_id=None):
        output_dim = 0
        if loaded_shard_id is None:  # fused on disk (Phi-3's qkv_proj)
            shard_offsets = [
                ("q", 0, self.total_num_heads * self.head_size),
                ("k", self.total_num_heads * self.head_size, self.total_num_kv_heads * self.head_size),
                ("v", (self.total_num_heads + self.total_num_kv_heads) * self.head_size,
                 self.total_num_kv_heads * self.head_size),
            ]
            for shard_id, shard_offset, shard_size in shard_offsets:
                loaded_weight_shard = np.take(loaded_weight, range(shard_offset, shard_offset + shard_size), output_dim)
                self.weight_loader(param, loaded_weight_shard, shard_id)
            return
        if loaded_shard_id == "q":
            shard_offset, shard_size = 0, self.num_heads * self.head_size
        elif loaded_shard_id == "k":
            shard_offset, shard_size = self.num_heads * self.head_size, self.num_kv_heads * self.head_size
        else:
            shard_offset = (self.num_heads + self.num_kv_heads) * self.head_size
            shard_size = self.num_kv_heads * self.head_size
        shard_rank = self.tp_rank if loaded_shard_id == "q" else self.tp_rank // self.num_kv_head_replicas
        start_idx = shard_rank * shard_size
        param[shard_offset:shard_offset + shard_size] = loaded_weight[start_idx:start_idx + shard_size]


class MergedColumnParallelLinear:
    def __init__(self, hidden, output_sizes, tp_size, tp_rank):
        self.output_sizes, self.tp_size, self.tp_rank = output_sizes, tp_size, tp_rank
        assert all(s % tp_size == 0 for s in output_sizes)
        self.weight = np.full((sum(output_sizes) // tp_size, hidden), np.nan, np.float32)

    def weight_loader(self, param, loaded_weight, loaded_shard_id=None):
        if loaded_shard_id is None:  # fused on disk (Phi-3's gate_up_proj)
            current_shard_offset, shard_offsets = 0, []
            for i, output_size in enumerate(self.output_sizes):
                shard_offsets.append((i, current_shard_offset, output_size))
                current_shard_offset += output_size
            for shard_id, shard_offset, shard_size in shard_offsets:
                self.weight_loader(param, loaded_weight[shard_offset:shard_offset + shard_size], shard_id)
            return
        shard_offset = sum(self.output_sizes[:loaded_shard_id]) // self.tp_size
        shard_size = self.output_sizes[loaded_shard_id] // self.tp_size
        start_idx = self.tp_rank * shard_size
        param[shard_offset:shard_offset + shard_size] = loaded_weight[start_idx:start_idx + shard_size]


class RowParallelLinear:
    def __init__(self, input_size, output_size, tp_size, tp_rank):
        assert input_size % tp_size == 0
        self.tp_rank = tp_rank
        self.weight = np.full((output_size, input_size // tp_size), np.nan, np.float32)

    def weight_loader(self, param, loaded_weight):
        input_dim = 1
        shard_size = param.shape[input_dim]
        start_idx = self.tp_rank * shard_size
        param[...] = loaded_weight[:, start_idx:start_idx + shard_size]


def vllm_rank_params(spec, tensors, layer, tp, rank):
    """One rank's merged parameters, loaded the way vLLM's model load_weights drives the loaders."""
    p = f"model.layers.{layer}."
    h, d, inter = spec["hidden"], spec["head_dim"], spec["inter"]
    qkv = QKVParallelLinear(h, d, spec["heads"], spec["kv"], tp, rank, spec["bias"])
    gate_up = MergedColumnParallelLinear(h, [inter, inter], tp, rank)
    o = RowParallelLinear(spec["heads"] * d, h, tp, rank)
    down = RowParallelLinear(inter, h, tp, rank)
    if spec["fused"]:
        qkv.weight_loader(qkv.weight, tensors[p + "self_attn.qkv_proj.weight"])
        gate_up.weight_loader(gate_up.weight, tensors[p + "mlp.gate_up_proj.weight"])
    else:
        # stacked_params_mapping: (".qkv_proj", ".q_proj", "q"), ..., (".gate_up_proj", ".gate_proj", 0), ...
        for s in "qkv":
            qkv.weight_loader(qkv.weight, tensors[p + f"self_attn.{s}_proj.weight"], s)
            if spec["bias"]:
                qkv.weight_loader(qkv.bias, tensors[p + f"self_attn.{s}_proj.bias"], s)
        gate_up.weight_loader(gate_up.weight, tensors[p + "mlp.gate_proj.weight"], 0)
        gate_up.weight_loader(gate_up.weight, tensors[p + "mlp.up_proj.weight"], 1)
    o.weight_loader(o.weight, tensors[p + "self_attn.o_proj.weight"])
    down.weight_loader(down.weight, tensors[p + "mlp.down_proj.weight"])
    params = {"qkv_proj": qkv.weight, "o_proj": o.weight, "gate_up_proj": gate_up.weight,
              "down_proj": down.weight}
    if spec["bias"]:
        params["qkv_proj.bias"] = qkv.bias
    for name, value in params.items():
        assert not np.isnan(value).any(), f"{name}: the loaders left rows unset"
    return params


# ---------------------------------------------------------------- writing it all
class Blob:
    """expected.bin: float32 arrays; the manifest records {offset, shape} (offset in floats)."""

    def __init__(self):
        self.chunks, self.size = [], 0

    def add(self, values):
        values = np.ascontiguousarray(values, dtype="<f4")
        ref = {"offset": self.size, "shape": list(values.shape)}
        self.chunks.append(values.tobytes())
        self.size += values.size
        return ref


def write_model(out, name, spec, blob, rng):
    root = os.path.join(out, name)
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as f:
        f.write(config_json(spec))
    stored, files = {}, []
    for tname, values in hf_tensors(spec, rng):
        raw, value = store(values, spec["dtype"])
        stored[tname] = value
        files.append((tname, spec["dtype"], value.shape, raw))
    if spec["layout"] == "single":
        write_safetensors(os.path.join(root, "model.safetensors"), files, {"format": "pt"})
        names = ["model.safetensors"]
    else:
        # Split inside the last layer (q/k in the first file, the rest in the second).
        cut = next(i for i, t in enumerate(files) if t[0] == f"model.layers.{spec['layers'] - 1}.self_attn.v_proj.weight")
        names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
        write_safetensors(os.path.join(root, names[0]), files[:cut], {"format": "pt"})
        write_safetensors(os.path.join(root, names[1]), files[cut:], {"format": "pt"})
        if spec["layout"] == "index":
            weight_map = {t[0]: names[0] if i < cut else names[1] for i, t in enumerate(files)}
            index = {"metadata": {"total_size": sum(len(t[3]) for t in files)}, "weight_map": weight_map}
            with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
                json.dump(index, f, indent=2)
    layer = spec["layers"] - 1  # the TP references use the last layer, so --layer matters
    return {
        "dir": name,
        "files": names,
        "layout": spec["layout"],
        "model_type": spec["model_type"],
        "dtype": spec["dtype"],
        "shape": {k: spec[k] for k in ("hidden", "heads", "kv", "head_dim", "inter", "layers")},
        "tensors": {t: blob.add(v) for t, v in stored.items()},
        "logical": {str(n): {k: blob.add(v) for k, v in logical_tensors(spec, stored, n).items()}
                    for n in range(spec["layers"])},
        "tp_layer": layer,
        "tp": {str(tp): [{k: blob.add(v) for k, v in vllm_rank_params(spec, stored, layer, tp, r).items()}
                         for r in range(tp)] for tp in spec["tp"]},
    }


def f32(shape, fill=0.25):
    return np.full(shape, fill, np.float32).astype("<f4").tobytes()


def hostile_cases(out, blob, rng):
    """Inputs the reader must refuse: (case, what is opened, the substrings its error must have)."""
    d = os.path.join(out, "hostile")
    os.makedirs(d)
    cases, cli = [], []
    cli_llama = dict(model_type="llama", hidden=8, heads=2, kv=1, head_dim=4, inter=12, layers=1,
                     dtype="BF16")

    def file_case(name, header, data=b"", length=None, expect=(), official=True):
        path = os.path.join(d, name + ".safetensors")
        write_raw(path, header, data, length)
        cases.append({"name": name, "kind": "file", "path": os.path.relpath(path, out),
                      "expect": [name + ".safetensors", *expect], "official_rejects": official})
        # The same file as a model directory's model.safetensors, for the command line.
        root = os.path.join(d, "cli", name)
        os.makedirs(root)
        shutil.copy(path, os.path.join(root, "model.safetensors"))
        with open(os.path.join(root, "config.json"), "w") as f:
            f.write(config_json(cli_llama))
        cli.append({"name": name, "path": os.path.relpath(root, out), "args": [],
                    "expect": [f"cli/{name}/model.safetensors", *expect]})

    a = {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}
    b = {"dtype": "F32", "shape": [4, 4], "data_offsets": [64, 128]}
    valid = {"a": a, "b": b}
    file_case("truncated", valid, f32(32)[:-10], expect=["'b'", "past the end", "truncated"])
    file_case("offsets_past_end", {"a": a, "b": {**b, "data_offsets": [64, 192]}}, f32(32),
              expect=["'b'", "[64, 192)", "past the end"])
    file_case("header_too_long", valid, f32(32), length=10**6,
              expect=["header length 1000000", "larger than the rest of the file"])
    file_case("huge_header_length", valid, f32(32), length=2**64 - 1,
              expect=["header length 18446744073709551615"])
    file_case("unknown_dtype", {"w": {"dtype": "F7", "shape": [4], "data_offsets": [0, 4]}}, f32(1),
              expect=["'w'", "unknown dtype 'F7'", "BF16"])
    file_case("shape_mismatch", {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}},
              f32(16)[:60], expect=["'w'", "needs 64 bytes", "hold 60"])
    file_case("overlap", {"a": a, "b": {**b, "data_offsets": [32, 96]}}, f32(24),
              expect=["overlap", "'a'", "'b'", "[0, 64)", "[32, 96)"])
    file_case("gap", {"a": a, "b": {**b, "data_offsets": [72, 136]}}, f32(34),
              expect=["'b'", "belong to no tensor"])
    file_case("trailing_bytes", valid, f32(34), expect=["8 trailing bytes"])
    file_case("not_json", b"{\"a\": {\"dtype\": \"F32\",", f32(1), expect=["not valid JSON"])
    file_case("not_an_object", b"[1, 2, 3]", expect=["not a JSON object"])
    file_case("entry_not_object", {"w": [1, 2]}, expect=["'w'", "not an object"])
    file_case("missing_offsets", {"w": {"dtype": "F32", "shape": [1]}}, f32(1), expect=["'w'", "data_offsets"])
    file_case("negative_dim", {"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 16]}}, f32(4),
              expect=["'w'", "negative number -1"])
    file_case("fractional_dim", {"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}, f32(1),
              expect=["'w'", "fractional"])
    file_case("shape_overflow", {"w": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 4]}},
              f32(1), expect=["'w'", "exceeds the size limit"])
    file_case("nested_shape", {"w": {"dtype": "F32", "shape": [[1]], "data_offsets": [0, 4]}}, f32(1),
              expect=["nests JSON deeper"])
    file_case("subbyte_dtype", {"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}, b"\0\0",
              expect=["'w'", "not a whole number of bytes"])
    file_case("metadata_not_strings", {"__metadata__": {"format": 1}, "a": a}, f32(16),
              expect=["__metadata__", "'format'", "strings only"])
    file_case("control_chars_in_name", {"evil\x1b[2J\nname": {"dtype": "X", "shape": [], "data_offsets": [0, 0]}},
              expect=["'evil\\x1b[2J\\x0aname'", "unknown dtype"])
    # Duplicate names: JSON keeps the last silently (the reference implementation accepts it);
    # we refuse the ambiguity.
    file_case("duplicate_name", b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
              b'"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', f32(1),
              expect=["'a'", "appears twice"], official=False)
    path = os.path.join(d, "too_short.safetensors")
    with open(path, "wb") as f:
        f.write(b"\x10\0\0")
    cases.append({"name": "too_short", "kind": "file", "path": os.path.relpath(path, out),
                  "expect": ["too_short.safetensors", "3 bytes", "too short"], "official_rejects": True})

    # Directories.
    def dir_case(name, files, index=None, expect=()):
        root = os.path.join(d, name)
        os.makedirs(root)
        for fname, tensors in files.items():
            write_safetensors(os.path.join(root, fname), tensors)
        if index is not None:
            with open(os.path.join(root, "model.safetensors.index.json"), "w") as f:
                f.write(index if isinstance(index, str) else json.dumps(index))
        cases.append({"name": name, "kind": "checkpoint", "path": os.path.relpath(root, out),
                      "expect": list(expect)})

    t = lambda n: (n, "F32", [2], f32(2))  # noqa: E731
    dir_case("index_missing_tensor", {"model-00001-of-00002.safetensors": [t("x.weight")]},
             {"weight_map": {"x.weight": "model-00001-of-00002.safetensors",
                             "model.layers.0.self_attn.v_proj.weight": "model-00001-of-00002.safetensors"}},
             expect=["model-00001-of-00002.safetensors", "'model.layers.0.self_attn.v_proj.weight'",
                     "has no such tensor"])
    dir_case("index_missing_file", {"a.safetensors": [t("x")]},
             {"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}},
             expect=["model.safetensors.index.json", "'b.safetensors'", "does not exist"])
    dir_case("index_escapes_directory", {"a.safetensors": [t("x")]},
             {"weight_map": {"x": "../truncated.safetensors"}},
             expect=["'x'", "'../truncated.safetensors'", "not a file name inside the directory"])
    dir_case("index_not_json", {"a.safetensors": [t("x")]}, "{\"weight_map\": ",
             expect=["model.safetensors.index.json", "not valid JSON"])
    dir_case("index_without_weight_map", {"a.safetensors": [t("x")]}, {"metadata": {}},
             expect=["model.safetensors.index.json", "weight_map"])
    dir_case("same_tensor_in_two_files", {"a.safetensors": [t("x")], "b.safetensors": [t("x")]},
             expect=["'x'", "a.safetensors", "b.safetensors", "is in both"])
    dir_case("no_safetensors", {}, expect=["no_safetensors", "no model.safetensors.index.json"])
    dir_case("hostile_file_inside", {}, expect=["'b'", "past the end"])
    shutil.copy(os.path.join(d, "truncated.safetensors"), os.path.join(d, "hostile_file_inside", "model.safetensors"))

    # Layers: checkpoints that read fine but do not hold the layer the config describes.
    llama = dict(model_type="llama", hidden=8, heads=2, kv=1, head_dim=4, inter=12, layers=1,
                 dtype="BF16", layout="single", bias=False, fused=False)

    def layer_case(name, edit, expect, layer=0, kind="layer", request=None, config=None,
                   cli_args=None, library=True):
        root = os.path.join(d, name)
        os.makedirs(root)
        tensors = []
        for tname, values in hf_tensors(llama, rng):
            raw, value = store(values, "BF16")
            tensors.append([tname, "BF16", list(value.shape), raw])
        tensors = edit(tensors)
        write_safetensors(os.path.join(root, "model.safetensors"), [tuple(x) for x in tensors])
        text = config_json(llama)
        if config:
            text = json.dumps({**json.loads(text), **config}, indent=2) + "\n"
        with open(os.path.join(root, "config.json"), "w") as f:
            f.write(text)
        case = {"name": name, "kind": kind, "path": os.path.relpath(root, out), "model_type": "llama",
                "shape": {k: llama[k] for k in ("hidden", "heads", "kv", "head_dim", "inter", "layers")},
                "layer": layer, "expect": ["model.safetensors", *expect]}
        if request:
            case["request"] = request
        if library:
            cases.append(case)
        # Through the command line too: --layer, and the dtype the case needs.
        args = ([f"--layer={layer}"] if layer else []) + (cli_args or [])
        cli.append({"name": name, "path": case["path"], "args": args, "expect": case["expect"]})

    def drop(suffix):
        return lambda ts: [x for x in ts if not x[0].endswith(suffix)]

    def retype(suffix, dtype, extra=()):
        def edit(ts):
            for x in ts:
                if x[0].endswith(suffix):
                    n = int(np.prod(x[2]))
                    x[1], x[3] = dtype, bytes(n * {"F8_E4M3": 1, "I8": 1, "F64": 8}[dtype])
            return ts + [list(e) for e in extra]
        return edit

    def reshape(suffix, shape):
        def edit(ts):
            for x in ts:
                if x[0].endswith(suffix):
                    x[2] = shape
                    x[3] = store(np.zeros(shape), "BF16")[0]
            return ts
        return edit

    def big_value(suffix, value):
        def edit(ts):
            for x in ts:
                if x[0].endswith(suffix):
                    v = bf16_values(np.frombuffer(x[3], "<u2").copy())
                    v[1] = value
                    x[3] = store(v, "BF16")[0]
            return ts
        return edit

    layer_case("missing_tensor", drop("layers.0.self_attn.v_proj.weight"),
               ["'model.layers.0.self_attn.v_proj.weight'", "no tensor"])
    layer_case("shape_not_config", reshape("layers.0.self_attn.k_proj.weight", [4, 9]),
               ["'model.layers.0.self_attn.k_proj.weight'", "[4, 9]", "hidden_size", "[4, 8]"])
    layer_case("weight_3d", reshape("layers.0.mlp.up_proj.weight", [12, 8, 1]),
               ["'model.layers.0.mlp.up_proj.weight'", "[12, 8, 1]", "does not match the config"])
    layer_case("fp8_with_scales", retype("layers.0.self_attn.q_proj.weight", "F8_E4M3",
                                         [("model.layers.0.self_attn.q_proj.weight_scale", "F32", [], f32(()))]),
               ["'model.layers.0.self_attn.q_proj.weight'", "F8_E4M3", "scales"])
    layer_case("int8_weights", retype("layers.0.mlp.down_proj.weight", "I8"),
               ["'model.layers.0.mlp.down_proj.weight'", "I8", "zero points"])
    layer_case("f64_weights", retype("layers.0.mlp.gate_proj.weight", "F64"),
               ["'model.layers.0.mlp.gate_proj.weight'", "F64"])
    layer_case("layer_out_of_range", lambda ts: ts, ["layer 3", "num_hidden_layers=1"], layer=3)
    # Reads fine in bf16, overflows when a run asks for fp16 (the CPU has none: no CLI case).
    layer_case("fp16_overflow", big_value("layers.0.self_attn.q_proj.weight", 1.0e5),
               ["'model.layers.0.self_attn.q_proj.weight'", "(0, 1)", "overflows fp16"],
               kind="window", request={"tensor": "w_q", "dtype": "fp16", "fine_in": "bf16"})
    cli.pop()
    # A config whose bias flags disagree with the checkpoint's tensors: both ways.
    def add_bias(ts):
        return ts + [["model.layers.0.self_attn.q_proj.bias", "BF16", [8], store(np.ones(8), "BF16")[0]]]
    layer_case("bias_not_in_config", add_bias,
               ["'model.layers.0.self_attn.q_proj.bias'", "config.json rules it out"], library=False)
    layer_case("bias_in_config_only", lambda ts: ts,
               ["'model.layers.0.self_attn.q_proj.bias'", "no tensor", "as this config.json does"],
               config={"attention_bias": True}, library=False)
    return cases, cli


def nan_in_one_layer(out):
    """A valid Llama-like fp32 checkpoint with one NaN in layer 1's k_proj: the file reader accepts
    it (NaN is a value), the command line refuses it at load on layer 1, naming the tensor and the
    index, and runs layer 0: proof that a run reads the layer --layer picks, not random
    weights."""
    spec = dict(model_type="llama", hidden=16, heads=2, kv=1, head_dim=8, inter=24, layers=2,
                dtype="F32", layout="single", bias=False, fused=False)
    root = os.path.join(out, "cli", "nan_in_layer1_k_proj")
    os.makedirs(root)
    poisoned = "model.layers.1.self_attn.k_proj.weight"
    tensors = []
    for name, values in hf_tensors(spec, np.random.default_rng(20261201)):
        values = np.array(values, np.float32)
        if name == poisoned:
            values[2, 3] = np.nan
        raw, value = store(values, "F32")
        tensors.append((name, "F32", list(value.shape), raw))
    write_safetensors(os.path.join(root, "model.safetensors"), tensors)
    with open(os.path.join(root, "config.json"), "w") as f:
        f.write(config_json(spec))
    return {"path": os.path.relpath(root, out), "layer": 1, "tensor": poisoned, "output": "k"}


def official_checks(out, manifest, blob, rng):
    """With the reference implementation: read back our files, refuse the hostile ones, and write
    one more checkpoint with it."""
    if safetensors is None:
        return {"available": False, "reason": OFFICIAL_MISSING}
    for m in [*manifest["models"].values(), *manifest["moe_models"].values()]:
        for fname in m["files"]:
            path = os.path.join(out, m["dir"], fname)
            with safe_open(path, framework="numpy") as f:
                for key in f.keys():
                    if m["dtype"] == "BF16":
                        continue  # numpy has no bfloat16: the keys and header were still parsed
                    ref = m["tensors"][key]
                    want = np.frombuffer(b"".join(blob.chunks), "<f4")[ref["offset"]:ref["offset"] + int(np.prod(ref["shape"]))]
                    got = f.get_tensor(key).astype(np.float32).reshape(-1)
                    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (path, key)
    for case in manifest["hostile"]:
        if case["kind"] != "file":
            continue
        try:
            with safe_open(os.path.join(out, case["path"]), framework="numpy") as f:
                list(f.keys())
            rejected = False
        except Exception:  # noqa: BLE001 - any refusal counts
            rejected = True
        assert rejected == case["official_rejects"], (case["name"], rejected)
    # A Llama-like fp16 checkpoint written by the package itself.
    spec = dict(model_type="llama", hidden=16, heads=2, kv=1, head_dim=8, inter=24, layers=1,
                dtype="F16", layout="single", bias=False, fused=False, tp=[1, 2])
    root = os.path.join(out, "official")
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w") as f:
        f.write(config_json(spec))
    stored = {name: values.astype(np.float16) for name, values in hf_tensors(spec, rng)}
    safetensors.numpy.save_file(stored, os.path.join(root, "model.safetensors"), metadata={"format": "pt"})
    as_f32 = {k: v.astype(np.float32) for k, v in stored.items()}
    return {"available": True, "version": safetensors.__version__, "dir": "official",
            "model_type": "llama", "layer": 0,
            "shape": {k: spec[k] for k in ("hidden", "heads", "kv", "head_dim", "inter", "layers")},
            "logical": {k: blob.add(v) for k, v in logical_tensors(spec, as_f32, 0).items()}}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    rng = np.random.default_rng(20260112)
    blob = Blob()
    manifest = {"models": {}, "hostile": []}
    for name, spec in MODELS.items():
        manifest["models"][name] = write_model(out, name, spec, blob, rng)
    manifest["moe_models"] = {name: write_moe_model(out, name, spec, blob, rng)
                              for name, spec in MOE_MODELS.items()}
    manifest["hostile"], manifest["cli"] = hostile_cases(out, blob, rng)
    manifest["official"] = official_checks(out, manifest, blob, rng)
    manifest["cli_nan"] = nan_in_one_layer(out)
    with open(os.path.join(out, "expected.bin"), "wb") as f:
        f.write(b"".join(blob.chunks))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    official = manifest["official"]
    print(f"make_checkpoints: {len(manifest['models'])} models, {len(manifest['moe_models'])} MoE/MLA "
          f"models, {len(manifest['hostile'])} hostile cases ({len(manifest['cli'])} as model "
          f"directories), {blob.size} expected floats in {out}; official safetensors: "
          + (official.get("version") if official["available"] else official["reason"]))


if __name__ == "__main__":
    main()
