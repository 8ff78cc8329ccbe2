#!/usr/bin/env python3
"""Records the real layer shapes transformers builds for every case of cases.py: real_shapes.json.

    pip install torch transformers   # torch: several GB, so not a CI dependency
    python3 tests/families/record_shapes.py tests/families/real_shapes.json

Each case's config is built by its transformers config class, and the text model by
AutoModelForCausalLM.from_config on torch's meta device (no memory, full size); every decoder
layer's parameters are read and named as fusebench's layers: the attention projections' rows
(q, k, v; fused storage split by the module's head counts), MLA's q_a/kv_a rows, and per kind of
MLP (dense, routed experts, shared experts) its intermediate size, its expert count and how many
decoder layers have it. tests/test_transformers_families.cpp compares fusebench's reading of the
same configs (written by write_configs.py) with this table, sharded as vLLM shards each layer.
Regenerate it after changing cases.py, and commit it.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import CONFIG_MAPPING, AutoModelForCausalLM  # noqa: E402

ATTN_FUSED = ("qkv_proj.weight", "query_key_value.weight", "c_attn.weight", "Wqkv.weight")
UNGATED_IN = ("c_fc.weight", "fc1.weight", "dense_h_to_4h.weight", "fc_in.weight")


def decoder_layers(model, n):
    for mod in model.modules():
        if isinstance(mod, torch.nn.ModuleList) and len(mod) == n:
            return mod
    raise RuntimeError("no ModuleList of num_hidden_layers decoder layers")


def rows(shape, hidden, conv1d=False):
    """out_features of a 2-D weight ([out, in]; gpt2's Conv1D stores [in, out])."""
    out, inp = (shape[1], shape[0]) if conv1d else (shape[0], shape[1])
    assert inp == hidden, (shape, hidden)
    return out


def expert_intermediate(shape, hidden, fused_gate_up):
    """[E, 2I, H] or [E, H, 2I] (transposed, gpt-oss and Llama-4) -> (E, I)."""
    e, a, b = shape
    other = a if b == hidden else b
    return e, other // 2 if fused_gate_up else other


def read_layer(layer, hidden, heads, head_dim):
    params = {n: tuple(p.shape) for n, p in layer.named_parameters()}
    conv1d = any(type(m).__name__ == "Conv1D" for m in layer.modules())
    out = {"attention": None, "mlp": {}}
    names = list(params)
    get = lambda suffix: [n for n in names if n.endswith(suffix)]  # noqa: E731
    # Attention.
    if get("q_a_proj.weight") or (get("kv_a_proj_with_mqa.weight")):
        q_a = get("q_a_proj.weight")
        out["attention"] = {
            "kind": "mla",
            "q_a": rows(params[q_a[0]], hidden) if q_a else None,
            "kv_a": rows(params[get("kv_a_proj_with_mqa.weight")[0]], hidden),
        }
    else:
        fused = [n for n in names if n.endswith(ATTN_FUSED) and "mlp" not in n]
        if fused:
            total = rows(params[fused[0]], hidden, conv1d)
            q = heads * head_dim
            k = (total - q) // 2
            bias = fused[0][: -len("weight")] + "bias" in params
            storage = fused[0].split(".")[-2]
        else:
            qn = [n for n in names if n.endswith("q_proj.weight")][0]
            q = rows(params[qn], hidden)
            k = rows(params[qn.replace("q_proj", "k_proj")], hidden)
            bias = qn.replace("weight", "bias") in params
            storage = "q_proj,k_proj,v_proj"
        out["attention"] = {"kind": "qkv", "q": q, "k": k, "v": k, "bias": bias,
                            "head_dim": head_dim, "storage": storage}
    # MLPs.
    mlp = out["mlp"]
    for n, shape in params.items():
        parts = n.split(".")
        shared = any("shared" in p for p in parts)
        experts = any(p == "experts" for p in parts) and not shared
        leaf = ".".join(parts[-2:])
        if experts and len(shape) == 3 and parts[-1] in ("gate_up_proj",):
            e, i = expert_intermediate(shape, hidden, True)
            mlp["expert"] = {"experts": e, "intermediate": i}
        elif experts and parts[-1] == "w1" and len(shape) == 2:  # DBRX: [E * I, H]
            mlp.setdefault("expert_w1_rows", shape[0])
        elif shared and leaf in ("gate_proj.weight",):
            mlp["shared_expert"] = {"intermediate": rows(shape, hidden)}
        elif shared and leaf == "input_linear.weight":  # GraniteMoeShared: fused [2I, H]
            mlp["shared_expert"] = {"intermediate": rows(shape, hidden) // 2}
        elif not experts and not shared and leaf == "gate_proj.weight":
            mlp["dense"] = {"intermediate": rows(shape, hidden), "gated": True,
                            "bias": n.replace("weight", "bias") in params}
        elif not experts and not shared and leaf == "gate_up_proj.weight" and len(shape) == 2:
            mlp["dense"] = {"intermediate": rows(shape, hidden) // 2, "gated": True,
                            "bias": n.replace("weight", "bias") in params}
        elif not experts and not shared and leaf.endswith(UNGATED_IN):
            mlp["dense"] = {"intermediate": rows(shape, hidden, conv1d), "gated": False}
        elif (not experts and not shared and leaf == "up_proj.weight"
              and not any(x.endswith("gate_proj.weight") and "shared" not in x and "experts" not in x
                          for x in names)):
            mlp["dense"] = {"intermediate": rows(shape, hidden), "gated": False}
    return out


def record(name, model_type, kwargs):
    cfg = CONFIG_MAPPING[model_type](**kwargs)
    text = cfg.get_text_config()
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(text)
    except Exception as e:  # transformers' own defaults that its modules cannot build
        return {"build_error": f"{type(e).__name__}: {e}"[:300]}
    hidden = text.hidden_size
    heads = text.num_attention_heads
    layers = decoder_layers(model, text.num_hidden_layers)
    dims = [getattr(m, "head_dim") for m in layers[0].modules()
            if isinstance(getattr(m, "head_dim", None), int)]
    head_dim = dims[0] if dims else hidden // heads
    groups = []
    for layer in layers:
        got = read_layer(layer, hidden, heads, head_dim)
        if "expert_w1_rows" in got["mlp"]:  # DBRX stacks its experts' w1 as [E * I, H]
            e = text.ffn_config.moe_num_experts
            got["mlp"]["expert"] = {"experts": e,
                                    "intermediate": got["mlp"].pop("expert_w1_rows") // e}
        if groups and groups[-1]["shapes"] == got:
            groups[-1]["layers"] += 1
        else:
            match = [g for g in groups if g["shapes"] == got]
            if match:
                match[0]["layers"] += 1
            else:
                groups.append({"layers": 1, "shapes": got})
    return {"model_class": type(model).__name__, "hidden": hidden, "heads": heads,
            "layer_groups": groups}


def main():
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "cases": {}}
    for name, model_type, kwargs, refusal in CASES:
        out["cases"][name] = {"model_type": model_type, "refusal": refusal,
                              **record(name, model_type, kwargs)}
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"record_shapes: {len(CASES)} cases in {sys.argv[1]}")


if __name__ == "__main__":
    main()
