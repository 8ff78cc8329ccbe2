// Model families as vLLM builds them (docs/models.md), from configs written with the published
// config.json fields (tests/configs/): the exact N and K of every fixture's GEMMs at tp 1 and at
// a tp that shards or replicates, the layers, biases and activations read, the refusals, and
// correctness of the new plans (bias, experts, MLA, GeLU-tanh, swigluoai on interleaved w13) on
// the CPU backend against split and the float64 reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "error_of.hpp"
#include "fusebench/cost_model.hpp"
#include "fusebench/model_context.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/verify.hpp"
#include "fusebench/workspace.hpp"

using namespace fusebench;

namespace {

std::string config_path(const std::string& file) {
  return std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file;
}
ModelShape config(const std::string& file) { return load_hf_config(config_path(file)); }

// label -> {N, K, bias} of every GEMM of the plan (members of grouped/batched steps too).
struct Gemm {
  std::int64_t n = 0, k = 0;
  bool bias = false;
  bool operator==(const Gemm&) const = default;
};
std::map<std::string, Gemm> gemms_of(const Plan& p) {
  std::map<std::string, Gemm> out;
  const auto add = [&](const GemmStep& g) { out[g.label] = {g.w.rows, g.w.cols, g.has_bias()}; };
  for (const Step& step : p.steps) {
    if (const auto* g = std::get_if<GemmStep>(&step)) add(*g);
    if (const auto* gg = std::get_if<GroupedGemmStep>(&step)) {
      for (const auto& g : gg->gemms) add(g);
    }
  }
  return out;
}
std::map<std::string, Gemm> gemms(const ModelShape& m, const std::string& op, LayerKind layer,
                                  int tp, const std::string& variant) {
  return gemms_of(build_plan(op, variant, shard(m, tp, layer), 4, DType::bf16));
}

using G = std::map<std::string, Gemm>;

void expect_all_ok(const std::vector<VerifyResult>& results) {
  ASSERT_FALSE(results.empty());
  for (const auto& r : results) {
    EXPECT_TRUE(r.ok()) << r.summary();
    if (r.variant != "split") {
      EXPECT_GE(r.comparisons.size(), 2u) << r.summary();
    }
  }
}

}  // namespace

TEST(Families, Qwen25BiasOnQkvOnlyAndTheSeparateBiasVariant) {
  const ModelShape m = config("qwen2.5-7b.json");
  EXPECT_EQ(m.name, "qwen2.5-7b");  // from the file name
  EXPECT_EQ(m.vllm_class, "Qwen2ForCausalLM");
  EXPECT_TRUE(m.qkv_bias);  // hard-coded by vLLM's Qwen2Attention, not in the config
  EXPECT_FALSE(m.o_bias);
  EXPECT_FALSE(m.mlp_bias);
  EXPECT_EQ(m.head_dim, 128);
  // tp 1: q 28*128, kv 4*128.
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "split"), (G{{"q_proj", {3584, 3584, true}},
                                                                  {"k_proj", {512, 3584, true}},
                                                                  {"v_proj", {512, 3584, true}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {4608, 3584, true}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused_bias_kernel"),
            (G{{"qkv_proj", {4608, 3584, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 1, "fused"),
            (G{{"gate_up_proj", {2 * 18944, 3584, false}}}));
  // tp 4: 7 q heads, 1 kv head per rank (4 kv heads / 4).
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 4, "fused"),
            (G{{"qkv_proj", {7 * 128 + 2 * 128, 3584, true}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 4, "split"),
            (G{{"gate_proj", {4736, 3584, false}}, {"up_proj", {4736, 3584, false}}}));
  // fused_bias_kernel exists only where there is a bias.
  EXPECT_EQ(variants_for(find_op("qkv"), shard(m, 1, LayerKind::attention)),
            (std::vector<std::string>{"split", "fused", "grouped", "fused_bias_kernel"}));
  EXPECT_EQ(variants_for(find_op("gate_up"), shard(m, 1, LayerKind::dense)),
            (std::vector<std::string>{"split", "fused", "batched"}));
  EXPECT_EQ(variants_for(find_op("qkv"), shard(find_model("llama3-8b"), 1)),
            (std::vector<std::string>{"split", "fused", "grouped"}));
}

TEST(Families, KvReplicationWithBiasGivesEachRankItsKvHeadsBias) {
  // Qwen2.5-1.5B: 12 q heads, 2 kv heads; tp 4 > 2 kv heads replicates each kv head twice.
  const ModelShape m = config("qwen2.5-1.5b.json");
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {12 * 128 + 2 * 2 * 128, 1536, true}}}));
  ShardShape s = shard(m, 4, LayerKind::attention);
  EXPECT_EQ(s.kv_replicas, 2);
  EXPECT_EQ(gemms_of(build_plan("qkv", "fused", s, 4, DType::bf16)),
            (G{{"qkv_proj", {3 * 128 + 2 * 128, 1536, true}}}));
  std::vector<std::int64_t> b_k_rows;
  for (int r = 0; r < 4; ++r) {
    s.rank = r;
    const Plan p = build_plan("qkv", "fused", s, 4, DType::f32);
    const BufferSpec& b = p.buffers.back();
    ASSERT_EQ(b.name, "b_qkv");
    ASSERT_EQ(b.parts, (std::vector<std::string>{"b_q", "b_k", "b_v"}));
    EXPECT_EQ(b.part_windows.at(0).row0, r * 3 * 128);  // q rows are never replicated
    EXPECT_EQ(b.part_windows.at(0).logical_rows, 12 * 128);
    b_k_rows.push_back(b.part_windows.at(1).row0);
  }
  EXPECT_EQ(b_k_rows, (std::vector<std::int64_t>{0, 0, 128, 128}));
  // Every rank's outputs, bias included, equal its rows of the unsharded float64 projection.
  auto backend = make_cpu_backend();
  for (int r = 0; r < 4; ++r) {
    s.rank = r;
    expect_all_ok(verify_op(*backend, "qkv", s, 3, DType::f32, 31 + r, true));
  }
}

TEST(Families, Qwen3MoeEveryLayerIsAnExpertSplitByTp) {
  const ModelShape m = config("qwen3-30b-a3b.json");
  ASSERT_EQ(m.mlp_layers.size(), 1u);
  EXPECT_EQ(m.mlp_layers[0].kind, LayerKind::expert);
  EXPECT_EQ(m.mlp_layers[0].layers, 48);  // mlp_only_layers empty, decoder_sparse_step 1
  EXPECT_EQ(m.experts, 128);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(op_layers("gate_up", m), (std::vector<LayerKind>{LayerKind::expert}));
  EXPECT_NE(m.refusal("tp_mlp").find("MoE"), std::string::npos);
  // tp 1: one expert's w13 is [2*768, 2048] (not intermediate_size 6144).
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 1, "fused"),
            (G{{"gate_up_proj", {1536, 2048, false}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {32 * 128 + 2 * 4 * 128, 2048, false}}}));
  // tp 4: FusedMoE splits each expert's intermediate: 768 / 4.
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "split"),
            (G{{"gate_proj", {192, 2048, false}}, {"up_proj", {192, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "fused"),
            (G{{"gate_up_proj", {384, 2048, false}}}));
  // A tp that does not divide the expert's intermediate (every tp the heads allow divides 768,
  // so the config is edited to 776 = 8 * 97) is refused with the field, while the attention
  // projections still shard.
  std::ifstream in(config_path("qwen3-30b-a3b.json"));
  std::stringstream text;
  text << in.rdbuf();
  std::string edited = text.str();
  const std::string key = "\"moe_intermediate_size\": 768";
  edited.replace(edited.find(key), key.size(), "\"moe_intermediate_size\": 776");
  const ModelShape odd = parse_hf_config(edited, "odd.json");
  const auto why = error_of([&] { shard(odd, 16, LayerKind::expert); });
  EXPECT_NE(why.find("tp=16"), std::string::npos) << why;
  EXPECT_NE(why.find("moe_intermediate_size=776 (layer expert) is not divisible by tp"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("valid tp sizes: 1, 2, 4, 8)"), std::string::npos) << why;
  EXPECT_NO_THROW(shard(odd, 16, LayerKind::attention));
  // The expert's tensors have their own names, for checkpoints.
  const Plan p = build_plan("gate_up", "split", shard(m, 1, LayerKind::expert), 2, DType::f32);
  EXPECT_EQ(p.buffers.at(1).parts.at(0), "w_expert_gate");
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(m, 4, LayerKind::expert), 5,
                          DType::f32, 3, true));
}

TEST(Families, Qwen2MoeSharedExpert) {
  const ModelShape m = config("qwen1.5-moe-a2.7b.json");
  EXPECT_TRUE(m.qkv_bias);  // Qwen2MoeAttention: bias=True
  EXPECT_EQ(op_layers("gate_up", m),
            (std::vector<LayerKind>{LayerKind::expert, LayerKind::shared_expert}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 1408, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::shared_expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 5632, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 352, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::shared_expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 1408, 2048, false}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 4, "fused"),
            (G{{"qkv_proj", {3 * 4 * 128, 2048, true}}}));
  const Plan p =
      build_plan("gate_up", "fused", shard(m, 1, LayerKind::shared_expert), 2, DType::f32);
  EXPECT_EQ(p.buffers.at(1).parts,
            (std::vector<std::string>{"w_shared_expert_gate", "w_shared_expert_up"}));
  // Dense layers only where the config has them (decoder_sparse_step / mlp_only_layers).
  const ModelShape mixed = parse_hf_config(
      R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
          "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
          "decoder_sparse_step": 2, "mlp_only_layers": [1], "num_hidden_layers": 6})",
      "mixed.json");
  ASSERT_EQ(mixed.mlp_layers.size(), 2u);
  EXPECT_EQ(mixed.mlp_layers[0].kind, LayerKind::dense);
  EXPECT_EQ(mixed.mlp_layers[0].intermediate, 96);
  EXPECT_EQ(mixed.mlp_layers[0].layers, 4);  // MoE where (i+1) % 2 == 0 and i != 1: 3, 5
  EXPECT_EQ(mixed.mlp_layers[1].layers, 2);
  EXPECT_TRUE(mixed.refusal("tp_mlp").empty());  // tp_mlp runs the dense layers
  EXPECT_EQ(op_layers("tp_mlp", mixed), (std::vector<LayerKind>{LayerKind::dense}));
}

TEST(Families, MixtralExpertUsesIntermediateSize) {
  const ModelShape m = config("mixtral-8x7b.json");
  EXPECT_EQ(op_layers("gate_up", m), (std::vector<LayerKind>{LayerKind::expert}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 14336, 4096, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 3584, 4096, false}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 8, "fused"),
            (G{{"qkv_proj", {4 * 128 + 2 * 128, 4096, false}}}));
}

TEST(Families, DeepSeekV3MlaIsReplicatedAndHasDenseExpertAndSharedLayers) {
  const ModelShape m = config("deepseek-v3.json");
  EXPECT_EQ(m.attention, LayerKind::mla);
  EXPECT_EQ(op_layers("qkv", m), (std::vector<LayerKind>{LayerKind::mla}));
  // fused_qkv_a_proj: N = q_lora_rank + kv_lora_rank + qk_rope_head_dim = 1536 + 512 + 64, the
  // same at tp 1 and 8 (disable_tp: replicated). Not 128 heads x 56.
  for (int tp : {1, 8}) {
    EXPECT_EQ(gemms(m, "qkv", LayerKind::mla, tp, "fused"),
              (G{{"fused_qkv_a_proj", {2112, 7168, false}}}))
        << tp;
    EXPECT_EQ(gemms(m, "qkv", LayerKind::mla, tp, "split"),
              (G{{"q_a_proj", {1536, 7168, false}}, {"kv_a_proj_with_mqa", {576, 7168, false}}}))
        << tp;
  }
  EXPECT_EQ(variants_for(find_op("qkv"), shard(m, 1, LayerKind::mla)),
            (std::vector<std::string>{"split", "fused", "grouped"}));
  EXPECT_NE(m.refusal("tp_attn").find("MLA"), std::string::npos);
  // first_k_dense_replace 3 dense layers (intermediate_size), 58 MoE layers with one shared
  // expert of moe_intermediate_size * n_shared_experts.
  ASSERT_EQ(op_layers("gate_up", m), (std::vector<LayerKind>{LayerKind::dense, LayerKind::expert,
                                                             LayerKind::shared_expert}));
  EXPECT_EQ(m.mlp_layers[0].layers, 3);
  EXPECT_EQ(m.mlp_layers[1].layers, 58);
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 1, "fused"),
            (G{{"gate_up_proj", {2 * 18432, 7168, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 2048, 7168, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::shared_expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 2048, 7168, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 8, "fused"),
            (G{{"gate_up_proj", {2 * 2304, 7168, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 8, "fused"),
            (G{{"gate_up_proj", {2 * 256, 7168, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::shared_expert, 8, "fused"),
            (G{{"gate_up_proj", {2 * 256, 7168, false}}}));
  const auto ctx = model_context(m);
  EXPECT_NE(ctx["moe"]["note"].get<std::string>().find("fused-MoE kernel"), std::string::npos);
  expect_all_ok(
      verify_op(*make_cpu_backend(), "qkv", shard(m, 8, LayerKind::mla), 2, DType::bf16, 8, true));
}

TEST(Families, DeepSeekV2LiteWithoutQLoraRankRefusesQkvButRunsItsMlps) {
  const ModelShape m = config("deepseek-v2-lite.json");
  const std::string why = m.refusal("qkv");
  EXPECT_NE(why.find("q_lora_rank is null"), std::string::npos) << why;
  EXPECT_TRUE(op_layers("qkv", m).empty());
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 4, "fused"),
            (G{{"gate_up_proj", {2 * 2736, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 352, 2048, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::shared_expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 704, 2048, false}}}));  // 1408 * 2 shared / 4
  EXPECT_THROW(build_plan("qkv", "fused", shard(m, 1, LayerKind::mla), 1, DType::f32),
               std::invalid_argument);
}

TEST(Families, GptOssBiasEverywhereSwigluoaiOnInterleavedW13) {
  const ModelShape m = config("gpt-oss-20b.json");
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_TRUE(m.o_bias);
  EXPECT_TRUE(m.mlp_bias);
  EXPECT_EQ(m.activation, Activation::swigluoai);
  EXPECT_DOUBLE_EQ(m.activation_limit, 7.0);
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {64 * 64 + 2 * 8 * 64, 2880, true}}}));  // q_size 4096 != hidden
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 4, "fused"),
            (G{{"qkv_proj", {16 * 64 + 2 * 2 * 64, 2880, true}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 1, "fused"),
            (G{{"gate_up_proj", {2 * 2880, 2880, true}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::expert, 4, "fused"),
            (G{{"gate_up_proj", {2 * 720, 2880, true}}}));
  const Plan fused = build_plan("gate_up", "fused", shard(m, 4, LayerKind::expert), 2, DType::f32);
  EXPECT_TRUE(fused.buffers.at(1).interleave_parts);  // w13: gate, up, gate, up, ...
  EXPECT_EQ(fused.outputs.count("gate_up"), 1u);
  // Split, fused (interleaved) and batched agree with each other and float64, bias and clamp
  // included, and the separate bias kernel gives the same.
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(m, 8, LayerKind::expert), 3,
                          DType::f32, 17, true));
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(m, 8, LayerKind::expert), 2,
                          DType::bf16, 18, true));
}

TEST(Families, GemmaGeluTanhAndQSizeNotHidden) {
  const ModelShape m = config("gemma-2-9b.json");
  EXPECT_EQ(m.activation, Activation::gelu_tanh);
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {16 * 256 + 2 * 8 * 256, 3584, false}}}));
  EXPECT_EQ(gemms(m, "qkv", LayerKind::attention, 8, "fused"),
            (G{{"qkv_proj", {2 * 256 + 2 * 256, 3584, false}}}));
  EXPECT_EQ(gemms(m, "gate_up", LayerKind::dense, 8, "fused"),
            (G{{"gate_up_proj", {2 * 1792, 3584, false}}}));
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(m, 16, LayerKind::dense), 3,
                          DType::f32, 5, true));
  // Gemma (1): no hidden_activation means approximate GeLU whatever hidden_act says (vLLM's
  // _get_gemma_act_fn); hidden_activation "gelu" is the exact one.
  const char* gemma = R"({"model_type": "gemma", "hidden_size": 64, "num_attention_heads": 4,
      "num_key_value_heads": 4, "head_dim": 16, "intermediate_size": 96, "hidden_act": "gelu")";
  EXPECT_EQ(parse_hf_config(std::string(gemma) + "}", "g.json").activation, Activation::gelu_tanh);
  const ModelShape exact =
      parse_hf_config(std::string(gemma) + R"(, "hidden_activation": "gelu"})", "g.json");
  EXPECT_EQ(exact.activation, Activation::gelu);
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(exact, 1), 3, DType::f32, 6, true));
}

TEST(Families, UngatedMlpsRefuseGateUpButRunQkv) {
  for (const char* file : {"pythia-1b.json", "gpt2.json"}) {
    const ModelShape m = config(file);
    EXPECT_FALSE(m.gated) << file;
    const std::string why = m.refusal("gate_up");
    EXPECT_NE(why.find("ungated"), std::string::npos) << why;
    EXPECT_EQ(m.refusal("tp_mlp"), why);
    EXPECT_TRUE(op_layers("gate_up", m).empty());
    EXPECT_TRUE(m.qkv_bias && m.o_bias) << file;  // fused query_key_value with bias
  }
  EXPECT_EQ(gemms(config("pythia-1b.json"), "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {3 * 2048, 2048, true}}}));
  EXPECT_EQ(gemms(config("pythia-1b.json"), "qkv", LayerKind::attention, 4, "fused"),
            (G{{"qkv_proj", {3 * 512, 2048, true}}}));
  // gpt2 names its sizes n_embd / n_head.
  EXPECT_EQ(gemms(config("gpt2.json"), "qkv", LayerKind::attention, 1, "fused"),
            (G{{"qkv_proj", {3 * 768, 768, true}}}));
  // A Llama-family config whose hidden_act has no gated form in vLLM's LlamaMLP.
  const ModelShape relu = parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 96, "hidden_act": "relu"})",
      "relu.json");
  EXPECT_NE(relu.refusal("gate_up").find("hidden_act='relu'"), std::string::npos);
  EXPECT_TRUE(relu.refusal("qkv").empty());
}

TEST(Families, UnmappableConfigsAreRefusedNamingTheField) {
  const auto mamba = error_of(
      [] { parse_hf_config(R"({"model_type": "mamba", "hidden_size": 768})", "mamba-130m.json"); });
  EXPECT_NE(mamba.find("model_type 'mamba'"), std::string::npos) << mamba;
  EXPECT_NE(mamba.find("mamba-130m.json"), std::string::npos) << mamba;
  const auto mla = error_of([] { config("deepseek-v3-no-kv-lora-rank.json"); });
  EXPECT_NE(mla.find("kv_lora_rank"), std::string::npos) << mla;
  const auto moe = error_of([] {
    parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "num_experts": 8, "num_experts_per_tok": 2})",
                    "moe.json");
  });
  EXPECT_NE(moe.find("moe_intermediate_size"), std::string::npos) << moe;
  // Expert fields under a family vLLM builds dense: a layout we cannot know.
  const auto dense = error_of([] {
    parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "num_local_experts": 8})",
                    "x.json");
  });
  EXPECT_NE(dense.find("num_local_experts"), std::string::npos) << dense;
  const auto type = error_of([] {
    parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "attention_bias": "yes"})",
                    "x.json");
  });
  EXPECT_TRUE(type.empty()) << "qwen2 does not read attention_bias: " << type;
  const auto flag = error_of([] {
    parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "attention_bias": "yes"})",
                    "x.json");
  });
  EXPECT_NE(flag.find("attention_bias"), std::string::npos) << flag;
}

TEST(Families, LlamaBiasFields) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 96, "attention_bias": true, "mlp_bias": true})",
      "b.json");
  EXPECT_TRUE(m.qkv_bias && m.o_bias && m.mlp_bias);
  // internlm3: qkv_bias overrides q/k/v only.
  const ModelShape internlm = parse_hf_config(
      R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 96, "bias": true, "qkv_bias": false})",
      "i.json");
  EXPECT_FALSE(internlm.qkv_bias);
  EXPECT_TRUE(internlm.o_bias);
  expect_all_ok(verify_op(*make_cpu_backend(), "gate_up", shard(m, 2), 3, DType::f32, 9, true));
  expect_all_ok(verify_op(*make_cpu_backend(), "qkv", shard(m, 2), 3, DType::bf16, 9, true));
}

TEST(Families, PresetsAreReadByTheConfigReader) {
  EXPECT_EQ(find_model("qwen2.5-7b").vllm_class, "Qwen2ForCausalLM");
  EXPECT_TRUE(find_model("qwen2.5-7b").qkv_bias);
  EXPECT_EQ(op_layers("gate_up", find_model("qwen3-30b-a3b")),
            (std::vector<LayerKind>{LayerKind::expert}));
  EXPECT_EQ(op_layers("gate_up", find_model("llama3-8b")),
            (std::vector<LayerKind>{LayerKind::dense}));
  EXPECT_FALSE(find_model("llama3-8b").qkv_bias);
}

TEST(Families, CostModelCountsBiasBytesAndTheSeparateKernel) {
  const ShardShape s = shard(find_model("qwen2.5-7b"), 1, LayerKind::attention);
  const std::int64_t m = 16, n = 4608, k = 3584;
  const double e = 2;  // bf16
  const Cost fused = cost_of(build_plan("qkv", "fused", s, m, DType::bf16));
  const Cost separate = cost_of(build_plan("qkv", "fused_bias_kernel", s, m, DType::bf16));
  const Cost grouped = cost_of(build_plan("qkv", "grouped", s, m, DType::bf16));
  EXPECT_DOUBLE_EQ(fused.bytes, (m * k + n * k + m * n + n) * e);  // epilogue reads N more
  EXPECT_EQ(fused.launches, 1);
  // The separate kernel reads y and the bias and writes y again: 2MN + N more than a GEMM.
  EXPECT_DOUBLE_EQ(separate.bytes, (m * k + n * k + m * n) * e + (2 * m * n + n) * e);
  EXPECT_EQ(separate.launches, 2);
  EXPECT_EQ(grouped.launches, 2);  // cuBLAS's grouped GEMM has no epilogue: one bias kernel
  EXPECT_DOUBLE_EQ(fused.flops, separate.flops);
}

TEST(Families, ModelNamesComeFromTheFile) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("fusebench_names_" + std::to_string(::getpid()));
  fs::create_directories(dir / "Llama-3.1-8B");
  std::ifstream in(config_path("llama-3.1-8b.json"));
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream(dir / "Llama-3.1-8B" / "config.json") << text.str();
  std::string with_path = text.str();
  with_path.insert(with_path.find('{') + 1, R"("_name_or_path": "meta-llama/Meta-Llama-3.1-8B",)");
  std::ofstream(dir / "config.json") << with_path;
  // The file's stem; else _name_or_path's last component; else the folder.
  EXPECT_EQ(config("llama-3.1-8b.json").name, "llama-3.1-8b");
  EXPECT_EQ(load_hf_config((dir / "config.json").string()).name, "Meta-Llama-3.1-8B");
  EXPECT_EQ(load_hf_config((dir / "Llama-3.1-8B" / "config.json").string()).name, "Llama-3.1-8B");
  EXPECT_EQ(model_name_for_config("/x/config.json", R"({"architectures": ["A B/C"]})"), "x");
  EXPECT_EQ(model_name_for_config("/config.json", R"({"architectures": ["A B/C"]})"), "A_B_C");
  const auto why = error_of([&] { load_hf_config(dir.string()); });
  EXPECT_NE(why.find("is a directory"), std::string::npos) << why;
  fs::remove_all(dir);
}

// Configs as transformers 5 writes them: Qwen3MoeConfig's attribute_map saves num_experts as
// num_local_experts; vLLM reads the attribute through the config object and sees the experts.
TEST(Families, AttributeMapAliasesAreReadAsTransformersWritesThem) {
  const ModelShape m = parse_hf_config(
      R"({"model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32,
          "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144,
          "moe_intermediate_size": 768, "num_local_experts": 128, "num_experts_per_tok": 8,
          "decoder_sparse_step": 1, "mlp_only_layers": [], "num_hidden_layers": 48})",
      "qwen3_moe.json");
  EXPECT_EQ(m.experts, 128);
  ASSERT_EQ(m.mlp_layer_list().size(), 1u);  // no dense MLP: every layer is MoE
  EXPECT_EQ(m.mlp_layer_list()[0].kind, LayerKind::expert);
  EXPECT_EQ(m.mlp_layer_list()[0].intermediate, 768);
  EXPECT_EQ(op_layers("gate_up", m), (std::vector<LayerKind>{LayerKind::expert}));
  // Both names present and disagreeing: refused naming both.
  const auto both = error_of([] {
    parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "moe_intermediate_size": 32, "num_experts": 8,
        "num_local_experts": 16, "num_experts_per_tok": 2})",
                    "x.json");
  });
  EXPECT_NE(both.find("'num_experts' (8) and 'num_local_experts' (16)"), std::string::npos) << both;
  // ERNIE-4.5-MoE (num_experts -> moe_num_experts, num_experts_per_tok -> moe_k) and GLM-4.5
  // (num_local_experts -> n_routed_experts) read through their own maps.
  const ModelShape ernie = parse_hf_config(
      R"({"model_type": "ernie4_5_moe", "hidden_size": 2560, "num_attention_heads": 20,
          "num_key_value_heads": 4, "intermediate_size": 12288, "moe_intermediate_size": 1536,
          "moe_k": 6, "moe_num_experts": 64, "moe_num_shared_experts": 2,
          "moe_layer_start_index": 1, "moe_layer_end_index": 27, "moe_layer_interval": 1,
          "num_hidden_layers": 28, "use_bias": false})",
      "ernie.json");
  EXPECT_EQ(ernie.experts, 64);
  EXPECT_EQ(ernie.experts_per_token, 6);
  ASSERT_EQ(ernie.mlp_layer_list().size(), 3u);
  EXPECT_EQ(ernie.mlp_layer_list()[0].layers, 1);           // dense layer 0
  EXPECT_EQ(ernie.mlp_layer_list()[1].layers, 27);          // MoE layers 1..27
  EXPECT_EQ(ernie.mlp_layer_list()[2].intermediate, 3072);  // 1536 * 2 shared
  EXPECT_EQ(ernie.mlp_kinds_at(0), (std::vector<LayerKind>{LayerKind::dense}));
  EXPECT_EQ(ernie.mlp_kinds_at(1),
            (std::vector<LayerKind>{LayerKind::expert, LayerKind::shared_expert}));
}

TEST(Families, ExpertOrMlaFieldsTheFamilyDoesNotReadAreRefused) {
  // Dense families carrying expert fields, under any of their names.
  for (const char* field : {"num_experts", "n_routed_experts", "moe_num_experts",
                            "moe_intermediate_size", "n_shared_experts"}) {
    std::string json = R"({"model_type": "qwen3", "hidden_size": 64,
        "num_attention_heads": 4, "intermediate_size": 96, ")";
    json += field;
    json += R"(": 8})";
    const auto why = error_of([&] { parse_hf_config(json, "d.json"); });
    std::string quoted = "'";
    quoted += field;
    quoted += "' = 8";
    EXPECT_NE(why.find(quoted), std::string::npos) << why;
    EXPECT_NE(why.find("without experts or MLA"), std::string::npos) << why;
  }
  // An MoE family given a field its rule does not use (Mixtral has no shared expert).
  const auto shared = error_of([] {
    parse_hf_config(R"({"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "num_local_experts": 8, "num_experts_per_tok": 2,
        "shared_expert_intermediate_size": 64})",
                    "m.json");
  });
  EXPECT_NE(shared.find("'shared_expert_intermediate_size' = 64"), std::string::npos) << shared;
  // Zero or null values say "none" and pass (transformers writes n_routed_experts: null).
  EXPECT_NO_THROW(parse_hf_config(R"({"model_type": "dots1", "hidden_size": 64,
      "num_attention_heads": 4, "intermediate_size": 96, "n_routed_experts": null,
      "n_shared_experts": null, "moe_intermediate_size": 32, "first_k_dense_replace": 0})",
                                  "dots.json"));
}

// The bias and head_dim rules read from vLLM's model files (docs/models.md, "Where each rule
// was read"): what the class builds, not what the config's name for it suggests.
TEST(Families, PhiMoeAlwaysBuildsAttentionBiasesAndRefusesAConfigWithout) {
  const std::string base = R"({"model_type": "phimoe", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 96,
      "num_local_experts": 4, "num_experts_per_tok": 2)";
  // PhiMoEAttention: QKVParallelLinear and RowParallelLinear with bias=True, hard-coded.
  const ModelShape m = parse_hf_config(base + R"(, "attention_bias": true})", "p.json");
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_TRUE(m.o_bias);
  // Without the flag transformers saves no bias tensors, which vLLM's loader then misses.
  for (const char* tail : {R"(, "attention_bias": false})", "}"}) {
    const auto why = error_of([&] { parse_hf_config(base + tail, "p.json"); });
    EXPECT_NE(why.find("'attention_bias' is"), std::string::npos) << why;
    EXPECT_NE(why.find("PhiMoEForCausalLM"), std::string::npos) << why;
  }
}

TEST(Families, CohereReadsHeadDimAndBuildsNoAttentionBias) {
  // CohereAttention: head_dim = config.head_dim when the config has one (Cohere2Config does).
  const ModelShape m = parse_hf_config(
      R"({"model_type": "cohere2", "hidden_size": 64, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 96})",
      "c.json");
  EXPECT_EQ(m.head_dim, 32);
  EXPECT_EQ(m.q_size(), 128);
  EXPECT_FALSE(m.qkv_bias);
  EXPECT_FALSE(m.o_bias);
  // qkv_proj and o_proj are bias=False: a true attention_bias would be dropped by the loader.
  const auto why = error_of([] {
    parse_hf_config(R"({"model_type": "cohere", "hidden_size": 64, "num_attention_heads": 4,
        "intermediate_size": 96, "attention_bias": true})",
                    "c.json");
  });
  EXPECT_NE(why.find("'attention_bias' is true"), std::string::npos) << why;
}

TEST(Families, GraniteMoeDerivesHeadDimAndHunyuanRefusesMlpBias) {
  // GraniteMoeAttention: head_dim = hidden_size / num_attention_heads, whatever head_dim says.
  const auto granite = error_of([] {
    parse_hf_config(R"({"model_type": "granitemoe", "hidden_size": 64, "num_attention_heads": 4,
        "head_dim": 32, "intermediate_size": 96, "num_local_experts": 4,
        "num_experts_per_tok": 2})",
                    "g.json");
  });
  EXPECT_NE(granite.find("head_dim=32 differs"), std::string::npos) << granite;
  // HunYuan: vLLM 0.23's class built an MLP bias from mlp_bias, transformers' (vLLM 0.34's
  // Transformers backend) none.
  const auto hunyuan = error_of([] {
    parse_hf_config(R"({"model_type": "hunyuan_v1_dense", "hidden_size": 64,
        "num_attention_heads": 4, "head_dim": 16, "intermediate_size": 96, "mlp_bias": true})",
                    "h.json");
  });
  EXPECT_NE(hunyuan.find("'mlp_bias' is true"), std::string::npos) << hunyuan;
}

TEST(Families, GraniteAndNemotronReadBiasLikeLlamaAndErnieDropsTheOProjBias) {
  // GraniteDecoderLayer, NemotronDecoderLayer: attention_bias or bias, on q/k/v and o_proj.
  for (const char* type : {"granite", "nemotron"}) {
    const ModelShape m = parse_hf_config(std::string(R"({"model_type": ")") + type +
                                             R"(", "hidden_size": 64, "num_attention_heads": 4,
            "intermediate_size": 96, "bias": true})",
                                         "b.json");
    EXPECT_TRUE(m.qkv_bias) << type;
    EXPECT_TRUE(m.o_bias) << type;
  }
  // Ernie4_5ForCausalLM: Llama's layers, o_proj.bias = None.
  const ModelShape ernie = parse_hf_config(
      R"({"model_type": "ernie4_5", "hidden_size": 64, "num_attention_heads": 4,
          "intermediate_size": 96, "attention_bias": true})",
      "e.json");
  EXPECT_TRUE(ernie.qkv_bias);
  EXPECT_FALSE(ernie.o_bias);
}

TEST(Families, Llama4BuildsNoAttentionBias) {
  // Llama4DecoderLayer: Llama4Attention(bias=False, bias_o_proj=False) whatever the config says.
  const std::string base = R"({"model_type": "llama4_text", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "intermediate_size": 32, "intermediate_size_mlp": 96, "num_local_experts": 4,
      "num_experts_per_tok": 1, "interleave_moe_layer_step": 1)";
  const ModelShape m = parse_hf_config(base + "}", "l.json");
  EXPECT_FALSE(m.qkv_bias);
  const auto why =
      error_of([&] { parse_hf_config(base + R"(, "attention_bias": true})", "l.json"); });
  EXPECT_NE(why.find("'attention_bias' is true"), std::string::npos) << why;
}

TEST(Families, MiniCpm3RefusesBiasFlags) {
  // MiniCPM3Attention, MiniCPMMLP: bias=False; transformers builds biases from these flags.
  for (const char* flag : {"attention_bias", "mlp_bias"}) {
    const auto why = error_of([&] {
      parse_hf_config(std::string(R"({"model_type": "minicpm3", "hidden_size": 64,
          "num_attention_heads": 4, "intermediate_size": 96, "q_lora_rank": 32,
          "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, ")") +
                          flag + R"(": true})",
                      "m.json");
    });
    EXPECT_NE(why.find(std::string("'") + flag + "' is true"), std::string::npos) << why;
  }
}
