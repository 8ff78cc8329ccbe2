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
    cases = []

    def file_case(name, header, data=b"", length=None, expect=(), official=True):
        path = os.path.join(d, name + ".safetensors")
        write_raw(path, header, data, length)
        cases.append({"name": name, "kind": "file", "path": os.path.relpath(path, out),
                      "expect": [name + ".safetensors", *expect], "official_rejects": official})

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
              f32(1), expect=["'w'", "overflows 64 bits"])
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

    def layer_case(name, edit, expect, layer=0, kind="layer", request=None):
        root = os.path.join(d, name)
        os.makedirs(root)
        tensors = []
        for tname, values in hf_tensors(llama, rng):
            raw, value = store(values, "BF16")
            tensors.append([tname, "BF16", list(value.shape), raw])
        tensors = edit(tensors)
        write_safetensors(os.path.join(root, "model.safetensors"), [tuple(x) for x in tensors])
        with open(os.path.join(root, "config.json"), "w") as f:
            f.write(config_json(llama))
        case = {"name": name, "kind": kind, "path": os.path.relpath(root, out), "model_type": "llama",
                "shape": {k: llama[k] for k in ("hidden", "heads", "kv", "head_dim", "inter", "layers")},
                "layer": layer, "expect": ["model.safetensors", *expect]}
        if request:
            case["request"] = request
        cases.append(case)

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
    # Reads fine in bf16, overflows when a run asks for fp16.
    layer_case("fp16_overflow", big_value("layers.0.self_attn.q_proj.weight", 1.0e5),
               ["'model.layers.0.self_attn.q_proj.weight'", "(0, 1)", "overflows fp16"],
               kind="window", request={"tensor": "w_q", "dtype": "fp16", "fine_in": "bf16"})
    return cases


def official_checks(out, manifest, blob, rng):
    """With the reference implementation: read back our files, refuse the hostile ones, and write
    one more checkpoint with it."""
    if safetensors is None:
        return {"available": False, "reason": OFFICIAL_MISSING}
    for m in manifest["models"].values():
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
    manifest["hostile"] = hostile_cases(out, blob, rng)
    manifest["official"] = official_checks(out, manifest, blob, rng)
    with open(os.path.join(out, "expected.bin"), "wb") as f:
        f.write(b"".join(blob.chunks))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    official = manifest["official"]
    print(f"make_checkpoints: {len(manifest['models'])} models, {len(manifest['hostile'])} hostile "
          f"cases, {blob.size} expected floats in {out}; official safetensors: "
          + (official.get("version") if official["available"] else official["reason"]))


if __name__ == "__main__":
    main()
