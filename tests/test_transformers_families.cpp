// Every family as transformers itself writes and builds it: each case of tests/families/cases.py
// is written by transformers' own config class (tests/families/write_configs.py, run by the
// families_configs ctest fixture) and read by fusebench; the real layer shapes transformers
// builds for it (tests/families/real_shapes.json, recorded on torch's meta device by
// tests/families/record_shapes.py) are sharded as vLLM shards each layer (QKVParallelLinear:
// heads / tp, kv heads / tp or one replicated head; MergedColumnParallelLinear and FusedMoE:
// intermediate / tp; MLA's fused_qkv_a_proj replicated) and compared with fusebench's fused
// GEMMs at tp 1, 2, 4 and 8, and with `fusebench --model-config=... --tp=T --list`. A case the
// suite refuses must be refused naming the field (cases.py says which words).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_run.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/shapes.hpp"

using namespace fusebench;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif
// Under ASan a full-size verification costs minutes of sanitized GEMMs for code paths that are
// the same at every size: the ASan run verifies one case of each plan structure (dense with and
// without a bias, gelu, MLA with routed and shared experts, gpt-oss's interleaved swigluoai with
// biases, a sparse MoE, a non-gated MLP) and the release run all of them (docs/building.md).
const std::set<std::string> kVerifiedUnderAsan = {"llama",  "qwen2",   "gemma", "deepseek_v3",
                                                  "gpt_oss", "qwen3_moe", "gpt2"};

const nlohmann::json& table() {
  static const nlohmann::json t = [] {
    std::ifstream in(FUSEBENCH_FAMILY_TABLE);
    return nlohmann::json::parse(in);
  }();
  return t;
}

std::string config_of(const std::string& name) {
  return std::string(FUSEBENCH_FAMILY_CONFIGS) + "/" + name + "/config.json";
}

struct Gemm {
  std::int64_t n = 0, k = 0;
  bool bias = false;
};
// The one GEMM of a fused plan.
Gemm fused_gemm(const std::string& op, const ShardShape& s) {
  const Plan p = build_plan(op, "fused", s, 4, DType::bf16);
  std::vector<Gemm> out;
  for (const Step& step : p.steps) {
    if (const auto* g = std::get_if<GemmStep>(&step))
      out.push_back({g->w.rows, g->w.cols, g->has_bias()});
  }
  EXPECT_EQ(out.size(), 1u) << op;
  return out.empty() ? Gemm{} : out.front();
}

LayerKind kind_of(const std::string& k) {
  if (k == "dense") return LayerKind::dense;
  if (k == "expert") return LayerKind::expert;
  return LayerKind::shared_expert;
}

// What the recorded layers say: per MLP kind its intermediate, expert count and decoder layers.
struct RealMlp {
  std::int64_t intermediate = 0, experts = 0, layers = 0;
  bool gated = true;
};

class TransformersFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformersFamily, ShapesPerRankEqualTheRealLayersAsVllmShardsThem) {
  const std::string name = GetParam();
  const nlohmann::json& rec = table()["cases"][name];
  const std::string path = config_of(name);
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " missing: tests/families/write_configs.py (families_configs) writes it";
  if (!rec["refusal"].is_null()) {
    const std::string words = rec["refusal"];
    std::string why;
    try {
      load_hf_config(path);
    } catch (const std::invalid_argument& e) {
      why = e.what();
    }
    EXPECT_NE(why.find(words), std::string::npos)
        << name << ": expected a refusal with '" << words << "', got '" << why << "'";
    const auto cli =
        fusebench::testing::run_fusebench("--backend=cpu --model-config=" + path + " --list");
    EXPECT_EQ(cli.exit_code, 2) << cli.output;
    EXPECT_NE(cli.output.find(words), std::string::npos) << cli.output;
    return;
  }
  ModelShape m;
  ASSERT_NO_THROW(m = load_hf_config(path)) << name;
  if (rec.contains("build_error")) {
    // transformers' own modules cannot build this default config: nothing real to compare
    // with (the case stays, to show fusebench reads it; its variation with the field set is
    // compared below under its own name).
    GTEST_SKIP() << name << ": transformers cannot build it (" << rec["build_error"] << ")";
  }
  ASSERT_EQ(m.hidden, rec["hidden"].get<std::int64_t>()) << name;
  // The recorded groups of identical decoder layers.
  const auto& groups = rec["layer_groups"];
  const auto& attn = groups[0]["shapes"]["attention"];
  std::map<std::string, RealMlp> real;
  std::int64_t total_layers = 0;
  for (const auto& g : groups) {
    EXPECT_EQ(g["shapes"]["attention"], attn) << name << ": attention differs between layers";
    total_layers += g["layers"].get<std::int64_t>();
    for (const auto& [kind, v] : g["shapes"]["mlp"].items()) {
      RealMlp& r = real[kind];
      r.intermediate = v["intermediate"];
      r.experts = v.value("experts", 0);
      r.gated = v.value("gated", true);
      r.layers += g["layers"].get<std::int64_t>();
    }
  }
  EXPECT_EQ(m.layers, total_layers) << name;
  // Attention.
  const bool mla = attn["kind"] == "mla";
  EXPECT_EQ(m.attention, mla ? LayerKind::mla : LayerKind::attention) << name;
  std::int64_t q = 0, k = 0, head_dim = 0, heads = rec["heads"], kv_heads = 0;
  if (mla) {
    EXPECT_EQ(m.kv_lora_rank + m.qk_rope_head_dim, attn["kv_a"].get<std::int64_t>()) << name;
    EXPECT_EQ(m.q_lora_rank, attn["q_a"].is_null() ? 0 : attn["q_a"].get<std::int64_t>()) << name;
  } else {
    q = attn["q"];
    k = attn["k"];
    head_dim = attn["head_dim"];
    kv_heads = k / head_dim;
    EXPECT_EQ(m.q_size(), q) << name;
    EXPECT_EQ(m.kv_size(), k) << name;
    EXPECT_EQ(m.qkv_bias, attn["bias"].get<bool>()) << name;
  }
  // MLP kinds.
  std::map<std::string, RealMlp> ours;
  for (const auto& l : m.mlp_layer_list()) {
    RealMlp& r = ours[std::string(to_string(l.kind))];
    r.intermediate = l.intermediate;
    r.layers = l.layers;
  }
  for (const auto& [kind, r] : real) {
    if (!r.gated) {
      EXPECT_FALSE(m.gated) << name;
      EXPECT_NE(m.refusal("gate_up").find("ungated"), std::string::npos) << name;
      continue;
    }
    ASSERT_TRUE(ours.count(kind)) << name << ": fusebench has no layer:" << kind;
    EXPECT_EQ(ours[kind].intermediate, r.intermediate) << name << " " << kind;
    EXPECT_EQ(ours[kind].layers, r.layers) << name << " " << kind;
    if (kind == "expert") {
      EXPECT_EQ(m.experts, r.experts) << name;
    }
  }
  for (const auto& [kind, r] : ours) EXPECT_TRUE(real.count(kind)) << name << ": extra " << kind;
  // Per rank, as vLLM shards: every tp of 1, 2, 4, 8.
  int widest = 0;  // the largest of them every layer shards by (verified below)
  for (int tp : {1, 2, 4, 8}) {
    bool attn_ok = heads % tp == 0;
    if (!mla && attn_ok) attn_ok = kv_heads >= tp ? kv_heads % tp == 0 : tp % kv_heads == 0;
    bool all_ok = attn_ok;
    const std::string at = name + " tp=" + std::to_string(tp);
    if (attn_ok) {
      const ShardShape s = shard(m, tp, m.attention);
      if (m.refusal("qkv").empty()) {
        const Gemm g = fused_gemm("qkv", s);
        const std::int64_t want =
            mla ? attn["kv_a"].get<std::int64_t>() + attn["q_a"].get<std::int64_t>()
                : q / tp + 2 * (kv_heads >= tp ? k / tp : head_dim);
        EXPECT_EQ(g.n, want) << at;
        EXPECT_EQ(g.k, m.hidden) << at;
      }
    } else {
      EXPECT_THROW(shard(m, tp, m.attention), std::invalid_argument) << at;
    }
    for (const auto& [kind, r] : real) {
      if (!r.gated) continue;
      const bool ok = attn_ok && r.intermediate % tp == 0;
      all_ok = all_ok && ok;
      if (!ok) {
        EXPECT_THROW(shard(m, tp, kind_of(kind)), std::invalid_argument) << at << " " << kind;
        continue;
      }
      const Gemm g = fused_gemm("gate_up", shard(m, tp, kind_of(kind)));
      EXPECT_EQ(g.n, 2 * r.intermediate / tp) << at << " " << kind;
      EXPECT_EQ(g.k, m.hidden) << at << " " << kind;
    }
    // The binary, as a user runs it.
    const auto cli = fusebench::testing::run_fusebench("--backend=cpu --model-config=" + path +
                                                       " --tp=" + std::to_string(tp) + " --list");
    if (!all_ok) {
      EXPECT_EQ(cli.exit_code, 2) << at << "\n" << cli.output;
      EXPECT_NE(cli.output.find("tp=" + std::to_string(tp) + " is invalid"), std::string::npos)
          << cli.output;
      continue;
    }
    ASSERT_EQ(cli.exit_code, 0) << at << "\n" << cli.output;
    widest = tp;
    const std::string model = "/model:" + m.name + "/layer:";
    const std::string suffix = "/tp:" + std::to_string(tp) + "/";
    const auto listed = [&](const std::string& op, const std::string& layer) {
      const std::string head = op + "/fused" + model + layer + "/tokens:1" + suffix;
      return cli.output.find(head) != std::string::npos;
    };
    EXPECT_EQ(listed("qkv", mla ? "mla" : "attention"), m.refusal("qkv").empty()) << at;
    for (const auto& [kind, r] : real) {
      EXPECT_EQ(listed("gate_up", kind), r.gated) << at << " " << kind << "\n" << cli.output;
    }
  }
  // Every fixture of the model at one token, checked against the float64 reference, at the
  // widest tp (the smallest shards: full-size models on the CPU); nothing timed (--verify-only:
  // timing full-size layers here checked nothing and took half the test's time).
  ASSERT_GT(widest, 0) << name << ": no tp of 1, 2, 4, 8 shards it";
  if (kUnderAsan && !kVerifiedUnderAsan.count(name))
    return;  // the release run verifies it; under ASan, one case per plan structure (below)
  const auto verify = fusebench::testing::run_fusebench("--backend=cpu --model-config=" + path +
                                                        " --tp=" + std::to_string(widest) +
                                                        " --verify-only --tokens=1 --dtypes=fp32");
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find("verification passed"), std::string::npos) << verify.output;
}

std::vector<std::string> case_names() {
  std::vector<std::string> out;
  for (const auto& [name, c] : table()["cases"].items()) out.push_back(name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, TransformersFamily, ::testing::ValuesIn(case_names()),
                         [](const auto& param_info) { return param_info.param; });

TEST(TransformersFamilies, TheTableCoversEveryCaseAndWasRecordedFromTransformers) {
  EXPECT_GE(table()["cases"].size(), 60u);
  EXPECT_TRUE(table()["transformers"].is_string());
  std::set<std::string> types;
  for (const auto& [name, c] : table()["cases"].items()) types.insert(c["model_type"]);
  // The 35 types the suite refused before, and the 18 it mapped.
  for (const char* t : {"falcon",
                        "stablelm",
                        "starcoder2",
                        "olmo",
                        "olmo2",
                        "olmo3",
                        "cohere",
                        "cohere2",
                        "granite",
                        "granitemoe",
                        "granitemoeshared",
                        "internlm3",
                        "exaone4",
                        "glm",
                        "glm4",
                        "glm4_moe",
                        "minicpm3",
                        "ernie4_5",
                        "ernie4_5_moe",
                        "hunyuan_v1_dense",
                        "hunyuan_v1_moe",
                        "llama4_text",
                        "phimoe",
                        "olmoe",
                        "nemotron",
                        "seed_oss",
                        "smollm3",
                        "helium",
                        "dots1",
                        "arcee",
                        "ministral",
                        "gpt_bigcode",
                        "gptj",
                        "persimmon",
                        "dbrx",
                        "llama",
                        "mistral",
                        "phi3",
                        "qwen2",
                        "qwen3",
                        "gemma",
                        "gemma2",
                        "gemma3_text",
                        "gemma3",
                        "mixtral",
                        "qwen2_moe",
                        "qwen3_moe",
                        "deepseek_v2",
                        "deepseek_v3",
                        "gpt_oss",
                        "gpt_neox",
                        "gpt2",
                        "phi"})
    EXPECT_TRUE(types.count(t)) << t;
}

}  // namespace
