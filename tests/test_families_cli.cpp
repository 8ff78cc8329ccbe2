// The model families end to end through the fusebench binary on the CPU backend: --verify passes
// for a bias model, an MoE model and an MLA model; entries carry layer, bias and activation;
// ungated and unmappable configs exit 2 naming what is missing; model names come from the files
// and a duplicate name is refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli_run.hpp"

namespace {

using fusebench::testing::CliResult;

CliResult run(const std::string& args) {
  return fusebench::testing::run_fusebench("--backend=cpu --timing-max-time=0.05 " + args);
}
std::string cfg(const std::string& file) {
  return std::string(FUSEBENCH_TEST_CONFIGS) + "/" + file;
}
std::filesystem::path temp_path(const std::string& name) {
  return fusebench::testing::temp_path("fusebench_families", name);
}

// The report's entries, after checking the run passed verification.
nlohmann::json verified_report(const std::string& args, const std::string& tag) {
  const auto path = temp_path(tag + ".json");
  const CliResult r = run(args + " --verify --tokens=1 --dtypes=fp32 --report=" + path.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("verification passed"), std::string::npos) << r.output;
  const auto report = fusebench::testing::load_json(path);
  std::filesystem::remove(path);
  EXPECT_FALSE(report["context"]["verification"].empty());
  for (const auto& v : report["context"]["verification"]) EXPECT_TRUE(v["ok"].get<bool>()) << v;
  return report;
}

const nlohmann::json* entry(const nlohmann::json& report, const std::string& name_prefix) {
  for (const auto& b : report["benchmarks"]) {
    if (b["name"].get<std::string>().rfind(name_prefix, 0) == 0) return &b;
  }
  return nullptr;
}

}  // namespace

TEST(FamiliesCli, BiasModelVerifiesWithKvReplicationAndCountsItsLaunches) {
  const auto report = verified_report(
      "--model-config=" + cfg("qwen2.5-1.5b.json") + " --ops=qkv,gate_up --tp=4", "bias");
  const auto* fused = entry(report, "qkv/fused/model:qwen2.5-1.5b/layer:attention/tokens:1/tp:4/");
  const auto* separate =
      entry(report, "qkv/fused_bias_kernel/model:qwen2.5-1.5b/layer:attention/tokens:1/tp:4/");
  ASSERT_NE(fused, nullptr);
  ASSERT_NE(separate, nullptr);
  EXPECT_EQ((*fused)["layer"], "attention");
  EXPECT_EQ((*fused)["bias"], true);
  EXPECT_EQ((*fused)["activation"], "none");
  EXPECT_EQ((*fused)["model_launches"].get<double>(), 1);
  EXPECT_EQ((*separate)["model_launches"].get<double>(), 2);
  // q 3*128 + kv 2*128 per rank (2 kv heads replicated over 4 ranks), K 1536, + N bias bytes.
  EXPECT_EQ((*fused)["model_flops"].get<double>(), 2.0 * 1 * 640 * 1536);
  EXPECT_EQ((*fused)["model_bytes"].get<double>(), 4.0 * (1536 + 640 * 1536 + 640 + 640));
  const auto* gate_up = entry(report, "gate_up/fused/model:qwen2.5-1.5b/layer:dense/");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ((*gate_up)["bias"], false);
  EXPECT_EQ((*gate_up)["activation"], "silu");
  // On the CPU the bias is added in the GEMM's own call, the separate add is one call more:
  // measured library calls equal the model's launches for every entry.
  for (const auto& b : report["benchmarks"]) {
    ASSERT_TRUE(b.contains("launches")) << b["name"];
    EXPECT_EQ(b["launches"].get<double>(), b["model_launches"].get<double>()) << b["name"];
  }
  EXPECT_EQ(report["context"]["models"][0]["vllm_class"], "Qwen2ForCausalLM");
}

TEST(FamiliesCli, MoeModelVerifiesOneExpertAtTp1And4) {
  const auto report = verified_report(
      "--model-config=" + cfg("qwen3-30b-a3b.json") + " --ops=gate_up --tp=1,4", "moe");
  for (const auto& b : report["benchmarks"]) EXPECT_EQ(b["layer"], "expert") << b["name"];
  const auto* tp4 = entry(report, "gate_up/fused/model:qwen3-30b-a3b/layer:expert/tokens:1/tp:4/");
  ASSERT_NE(tp4, nullptr);
  EXPECT_EQ((*tp4)["model_flops"].get<double>(), 2.0 * 1 * 384 * 2048);  // 2 * 768/4 rows
  const auto& moe = report["context"]["models"][0]["moe"];
  EXPECT_EQ(moe["experts"], 128);
  EXPECT_NE(moe["note"].get<std::string>().find("one expert's gate/up GEMM pair"),
            std::string::npos);
}

// One routed expert's gate_up runs the rows that expert gets, not the layer's M tokens (issue
// 30 item 5): tokens * 8 / E_active for qwen3-30b-a3b's 128 experts, top-8.
TEST(FamiliesCli, ExpertGateUpRunsTheRowsOneRoutedExpertGets) {
  const auto path = temp_path("expert-rows.json");
  const CliResult r = run("--model-config=" + cfg("qwen3-30b-a3b.json") +
                          " --ops=gate_up --tp=4 --tokens=16,1024 --dtypes=fp32 --verify "
                          "--cpu-threads=1 --report=" +
                          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("tokens=1024 (expert rows 64)"), std::string::npos) << r.output;
  const auto report = fusebench::testing::load_json(path);
  std::filesystem::remove(path);
  const std::map<int, int> rows = {{16, 2}, {1024, 64}};  // E_active 81.6 and 128.0
  int entries = 0;
  for (const auto& b : report["benchmarks"]) {
    ++entries;
    const int tokens = static_cast<int>(b["tokens"].get<double>());
    ASSERT_TRUE(b.contains("expert_rows")) << b["name"];
    EXPECT_EQ(b["expert_rows"]["rows"], rows.at(tokens)) << b["name"];
    EXPECT_EQ(b["expert_rows"]["tokens"], tokens) << b["name"];
    if (b["variant"] == "fused") {  // 2 * 768 / 4 columns per rank, K 2048, at the rows
      EXPECT_EQ(b["model_flops"].get<double>(), 2.0 * rows.at(tokens) * 384 * 2048) << b["name"];
    }
  }
  EXPECT_EQ(entries, 4);
  for (const auto& v : report["context"]["verification"]) {
    EXPECT_TRUE(v["ok"].get<bool>()) << v;
    EXPECT_EQ(v["rows"], rows.at(v["tokens"].get<int>())) << v;
  }
}

TEST(FamiliesCli, MlaModelVerifiesTheReplicatedFusedQkvA) {
  const auto report =
      verified_report("--model-config=" + cfg("deepseek-v3.json") + " --ops=qkv --tp=1,8", "mla");
  std::set<double> flops;
  for (const auto& b : report["benchmarks"]) {
    EXPECT_EQ(b["layer"], "mla") << b["name"];
    if (b["variant"] == "fused") flops.insert(b["model_flops"].get<double>());
  }
  EXPECT_EQ(flops, (std::set<double>{2.0 * 1 * 2112 * 7168}));  // same N at tp 1 and 8
  ASSERT_NE(entry(report, "qkv/fused/model:deepseek-v3/layer:mla/tokens:1/tp:8/"), nullptr);
}

TEST(FamiliesCli, GptOssVerifiesSwigluoaiExpertsAndTpAttnWithRowBias) {
  const auto report = verified_report(
      "--model-config=" + cfg("gpt-oss-20b.json") + " --ops=gate_up,tp_attn --tp=2", "gptoss");
  const auto* expert = entry(report, "gate_up/fused/model:gpt-oss-20b/layer:expert/");
  ASSERT_NE(expert, nullptr);
  EXPECT_EQ((*expert)["activation"], "swigluoai");
  EXPECT_EQ((*expert)["bias"], true);
  ASSERT_NE(entry(report, "gate_up/fused_bias_kernel/model:gpt-oss-20b/layer:expert/"), nullptr);
  const auto* attn = entry(report, "tp_attn/paired/model:gpt-oss-20b/layer:attention/");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ((*attn)["bias"], true);
}

TEST(FamiliesCli, UngatedModelRefusesGateUpWhenAskedAndRunsQkvByDefault) {
  const CliResult asked = run("--model-config=" + cfg("pythia-1b.json") + " --ops=gate_up --list");
  EXPECT_EQ(asked.exit_code, 2) << asked.output;
  EXPECT_NE(asked.output.find("gate_up cannot run on pythia-1b"), std::string::npos)
      << asked.output;
  EXPECT_NE(asked.output.find("ungated"), std::string::npos) << asked.output;
  const CliResult default_ops = run("--model-config=" + cfg("pythia-1b.json") + " --list");
  EXPECT_EQ(default_ops.exit_code, 0) << default_ops.output;
  EXPECT_NE(default_ops.output.find("qkv/fused/model:pythia-1b/layer:attention/"),
            std::string::npos)
      << default_ops.output;
  EXPECT_EQ(default_ops.output.find("gate_up/"), std::string::npos) << default_ops.output;
  EXPECT_NE(default_ops.output.find("gate_up left out for pythia-1b"), std::string::npos)
      << default_ops.output;
}

TEST(FamiliesCli, UnmappableConfigsExit2NamingTheField) {
  const auto mamba_path = temp_path("mamba-130m.json");
  std::ofstream(mamba_path) << R"({"model_type": "mamba", "hidden_size": 768})";
  const CliResult mamba = run("--model-config=" + mamba_path.string() + " --list");
  std::filesystem::remove(mamba_path);
  EXPECT_EQ(mamba.exit_code, 2) << mamba.output;
  EXPECT_NE(mamba.output.find("model_type 'mamba'"), std::string::npos) << mamba.output;
  const CliResult mla =
      run("--model-config=" + cfg("deepseek-v3-no-kv-lora-rank.json") + " --list");
  EXPECT_EQ(mla.exit_code, 2) << mla.output;
  EXPECT_NE(mla.output.find("missing field 'kv_lora_rank'"), std::string::npos) << mla.output;
  const CliResult lite =
      run("--model-config=" + cfg("deepseek-v2-lite.json") + " --ops=qkv --list");
  EXPECT_EQ(lite.exit_code, 2) << lite.output;
  EXPECT_NE(lite.output.find("q_lora_rank is null"), std::string::npos) << lite.output;
  // An expert intermediate tp does not divide (Qwen3-30B-A3B's 768 edited to 776 = 8 * 97).
  std::ifstream in(cfg("qwen3-30b-a3b.json"));
  std::stringstream text;
  text << in.rdbuf();
  std::string edited = text.str();
  const std::string key = "\"moe_intermediate_size\": 768";
  edited.replace(edited.find(key), key.size(), "\"moe_intermediate_size\": 776");
  const auto odd = temp_path("odd-moe.json");
  std::ofstream(odd) << edited;
  const CliResult moe_tp = run("--model-config=" + odd.string() + " --ops=gate_up --tp=16 --list");
  EXPECT_EQ(moe_tp.exit_code, 2) << moe_tp.output;
  EXPECT_NE(moe_tp.output.find("moe_intermediate_size=776 (layer expert) is not divisible by tp"),
            std::string::npos)
      << moe_tp.output;
  std::filesystem::remove(odd);
}

TEST(FamiliesCli, ModelConfigsInOneFolderKeepTheirNamesAndDuplicatesAreRefused) {
  const CliResult two = run("--model-config=" + cfg("llama-3.1-8b.json") + " --model-config=" +
                            cfg("mistral-7b-v0.1.json") + " --ops=qkv --tokens=1 --list");
  EXPECT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("model:llama-3.1-8b/"), std::string::npos) << two.output;
  EXPECT_NE(two.output.find("model:mistral-7b-v0.1/"), std::string::npos) << two.output;
  namespace fs = std::filesystem;
  const auto dir = temp_path("dup");
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  fs::copy_file(cfg("llama-3.1-8b.json"), dir / "a" / "llama.json");
  fs::copy_file(cfg("mistral-7b-v0.1.json"), dir / "b" / "llama.json");
  const CliResult dup = run("--model-config=" + (dir / "a" / "llama.json").string() +
                            " --model-config=" + (dir / "b" / "llama.json").string() + " --list");
  EXPECT_EQ(dup.exit_code, 2) << dup.output;
  EXPECT_NE(dup.output.find("both give the model name 'llama'"), std::string::npos) << dup.output;
  fs::copy_file(cfg("llama-3.1-8b.json"), dir / "llama3-8b.json");
  const CliResult preset =
      run("--models=llama3-8b --model-config=" + (dir / "llama3-8b.json").string() + " --list");
  EXPECT_EQ(preset.exit_code, 2) << preset.output;
  EXPECT_NE(preset.output.find("the preset llama3-8b"), std::string::npos) << preset.output;
  fs::remove_all(dir);
}
