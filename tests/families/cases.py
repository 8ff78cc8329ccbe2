"""The model configurations the family tests write with transformers' own config classes.

Each case is a model_type, the keyword arguments given to its config class (none: the class's
defaults, as `XConfig().save_pretrained(dir)` writes them), and, where fusebench must refuse the
config, the words its message must contain and why (the family's reading, not a guess).
Shared by write_configs.py (transformers alone, run by the test) and record_shapes.py (torch on
the meta device, run by hand to regenerate real_shapes.json).
"""

# name -> (model_type, kwargs, refusal substring or None)
CASES = [
    # Mapped before this table: defaults.
    ("llama", "llama", {}, None),
    ("mistral", "mistral", {}, None),
    ("phi3", "phi3", {}, None),
    ("qwen2", "qwen2", {}, None),
    ("qwen3", "qwen3", {}, None),
    ("gemma", "gemma", {}, None),
    ("gemma2", "gemma2", {}, None),
    ("gemma3_text", "gemma3_text", {}, None),
    ("gemma3", "gemma3", {}, None),
    ("llava", "llava", {}, None),
    ("mixtral", "mixtral", {}, None),
    ("qwen2_moe", "qwen2_moe", {}, None),
    ("qwen3_moe", "qwen3_moe", {}, None),
    ("qwen3_moe_dense_layers", "qwen3_moe",
     {"mlp_only_layers": [0, 5], "decoder_sparse_step": 2, "num_hidden_layers": 8}, None),
    ("deepseek_v2", "deepseek_v2", {"num_experts_per_tok": 6, "first_k_dense_replace": 1}, None),
    ("deepseek_v2_lite", "deepseek_v2",
     {"q_lora_rank": None, "num_experts_per_tok": 6, "first_k_dense_replace": 1}, None),
    ("deepseek_v3", "deepseek_v3", {}, None),
    ("gpt_oss", "gpt_oss", {}, None),
    ("gpt_neox", "gpt_neox", {}, None),
    ("gpt2", "gpt2", {}, None),
    ("phi", "phi", {}, None),
    # The 35 refused before.
    ("falcon_7b", "falcon", {}, None),
    ("falcon_40b", "falcon",
     {"hidden_size": 8192, "num_attention_heads": 128, "num_kv_heads": 8,
      "new_decoder_architecture": True, "num_hidden_layers": 60}, None),
    ("falcon_mha", "falcon", {"multi_query": False, "hidden_size": 4096,
                              "num_attention_heads": 32}, None),
    ("stablelm", "stablelm", {}, None),
    ("starcoder2", "starcoder2", {}, None),
    ("olmo", "olmo", {}, None),
    ("olmo2", "olmo2", {}, None),
    ("olmo3", "olmo3", {}, None),
    ("cohere", "cohere", {}, None),
    ("cohere2", "cohere2", {}, None),
    ("granite", "granite", {}, None),
    ("granitemoe", "granitemoe", {}, None),
    ("granitemoeshared", "granitemoeshared", {"shared_intermediate_size": 1024}, None),
    ("internlm3", "internlm3", {}, None),
    ("exaone4", "exaone4", {}, None),
    ("glm", "glm", {}, None),
    ("glm4", "glm4", {}, None),
    # transformers' default GLM-4.5 config has 96 heads of hidden 4096 and no head_dim:
    # 4096 / 96 is no integer.
    ("glm4_moe_default", "glm4_moe", {}, "hidden_size=4096 is not divisible by num_attention_heads=96"),
    ("glm4_moe", "glm4_moe", {"head_dim": 128}, None),
    ("minicpm3", "minicpm3", {}, None),
    ("ernie4_5", "ernie4_5", {}, None),
    ("ernie4_5_moe", "ernie4_5_moe", {}, None),
    # transformers' HunYuan defaults have head_dim None, which its own modules cannot build.
    ("hunyuan_v1_dense_default", "hunyuan_v1_dense", {}, None),
    ("hunyuan_v1_dense", "hunyuan_v1_dense", {"head_dim": 128}, None),
    # num_experts 1: transformers builds one routed expert and a shared MLP, vLLM a dense MLP.
    ("hunyuan_v1_moe_default", "hunyuan_v1_moe", {"head_dim": 128}, "'num_experts' = 1"),
    ("hunyuan_v1_moe", "hunyuan_v1_moe",
     {"head_dim": 128, "num_experts": 64, "moe_topk": 8, "moe_intermediate_size": 3072,
      "use_mixed_mlp_moe": 1, "num_shared_expert": 1, "intermediate_size": 3072}, None),
    # vLLM's HunYuanSparseMoeBlock reads moe_intermediate_size and use_mixed_mlp_moe, which
    # HunYuanMoEV1Config does not write (the released configs carry them).
    ("hunyuan_v1_moe_no_sizes", "hunyuan_v1_moe", {"head_dim": 128, "num_experts": 64,
                                                   "moe_topk": 8},
     "missing field 'moe_intermediate_size'"),
    ("llama4_text", "llama4_text", {}, None),
    ("llama4_interleaved", "llama4_text", {"interleave_moe_layer_step": 2}, None),
    ("llama4", "llama4", {}, None),
    # PhimoeConfig's default attention_bias is false (transformers then builds no q/k/v/o bias),
    # but vLLM's PhiMoEAttention builds them whatever it says: vLLM cannot load such a checkpoint.
    ("phimoe", "phimoe", {}, "'attention_bias' is false"),
    ("phimoe_bias", "phimoe", {"attention_bias": True}, None),
    ("olmoe", "olmoe", {}, None),
    ("nemotron_default", "nemotron", {}, None),
    ("nemotron", "nemotron", {"num_key_value_heads": 8}, None),
    ("seed_oss", "seed_oss", {}, None),
    ("smollm3", "smollm3", {}, None),
    ("helium", "helium", {}, None),
    ("dots1", "dots1", {}, None),
    ("dots1_moe", "dots1",
     {"n_routed_experts": 128, "n_shared_experts": 2, "num_experts_per_tok": 6,
      "first_k_dense_replace": 1}, None),
    ("arcee", "arcee", {}, None),
    ("ministral_default", "ministral", {}, None),
    ("ministral", "ministral", {"head_dim": 128}, None),
    ("gpt_bigcode", "gpt_bigcode", {}, None),
    ("gptj", "gptj", {}, None),
    ("persimmon", "persimmon", {}, None),
    # DbrxConfig's default attn_config has no rope_theta, without which its modules do not build.
    ("dbrx", "dbrx", {"attn_config": {"kv_n_heads": 8, "rope_theta": 500000.0}}, None),
    # A dense family carrying expert fields.
    ("qwen3_with_experts", "qwen3", {"num_experts": 8, "moe_intermediate_size": 768},
     "'moe_intermediate_size' = 768"),
]

TPS = [1, 2, 4, 8]
