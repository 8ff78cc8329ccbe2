// Checkpoints saved by transformers itself (tests/families/checkpoints/, written by
// tests/families/make_tiny_checkpoints.py with save_pretrained): every logical weight fusebench
// reads from layer 0 equals the rows transformers' own forward() cuts from the stored tensor
// (expected.json: per logical tensor its row sums, computed there from the fused layouts as
// GPTNeoXAttention, FalconAttention, GPTBigCodeAttention, GPT2Attention (Conv1D),
// Phi3Attention/Phi3MLP and Glm4MLP split them), and `fusebench --weights=DIR --verify --tokens=1`
// passes, naming each weight's source tensor in context.weights.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_run.hpp"
#include "fusebench/checkpoint.hpp"
#include "fusebench/hf_layer.hpp"

using namespace fusebench;

namespace {

const std::filesystem::path kDir = FUSEBENCH_FAMILY_CHECKPOINTS;

const nlohmann::json& expected() {
  static const nlohmann::json e = [] {
    std::ifstream in(kDir / "expected.json");
    return nlohmann::json::parse(in);
  }();
  return e;
}

// Checkpoints transformers saves in a layout vLLM cannot load, and the words of the refusal:
// PhimoeConfig's default attention_bias=false saves no q/k/v/o biases, which vLLM's
// PhiMoEAttention always builds (bias=True), so its loader finds them missing.
const std::map<std::string, std::string> kRefused = {{"phimoe", "'attention_bias' is false"}};

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& [name, v] : expected()["checkpoints"].items())
    if (!kRefused.count(name)) out.push_back(name);
  return out;
}

class FamilyCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyCheckpoint, LogicalWeightsAreTheRowsTransformersCutsAndVerify) {
  const std::string name = GetParam();
  const auto dir = kDir / name;
  const ModelShape m = load_hf_config((dir / "config.json").string());
  const HfLayerWeights w(std::make_shared<Checkpoint>(dir.string()), find_layer_family(m.family), m,
                         0);
  const auto sources = w.sources();
  for (const auto& [logical, want] : expected()["checkpoints"][name].items()) {
    if (logical.rfind("o_proj.bias", 0) == 0) {
      // Stored by transformers, not built by vLLM's class (its loader skips the extra bias).
      EXPECT_FALSE(w.has("b_o")) << name;
      continue;
    }
    ASSERT_TRUE(w.has(logical)) << name << " " << logical;
    const std::int64_t rows = want["rows"];
    const std::int64_t cols = logical[0] == 'b' ? 1 : logical == "w_o" ? m.q_size() : m.hidden;
    WindowRequest r;
    r.name = logical;
    r.logical_rows = rows;
    r.logical_cols = cols;
    r.rows = rows;
    r.cols = cols;
    const auto values = w.window(r);
    ASSERT_EQ(values.size(), static_cast<std::size_t>(rows * cols)) << name << " " << logical;
    for (std::int64_t i = 0; i < rows; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < cols; ++j) sum += values[i * cols + j];
      const double ref = want["row_sums"][i];
      ASSERT_NEAR(sum, ref, 1e-5 + 1e-5 * std::abs(ref)) << name << " " << logical << " row " << i;
    }
    EXPECT_FALSE(sources.at(logical).empty());
  }
  // End to end, as a user runs it.
  const auto report = fusebench::testing::temp_path("family_ckpt", name + ".json");
  const auto cli = fusebench::testing::run_fusebench(
      "--backend=cpu --weights=" + dir.string() +
      " --verify --tokens=1 --timing-max-time=0.01 --report=" + report.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_NE(cli.output.find("verification passed"), std::string::npos) << cli.output;
  const auto doc = fusebench::testing::load_json(report);
  std::filesystem::remove(report);
  const auto& ck = doc["context"]["weights"]["checkpoints"][0];
  EXPECT_EQ(ck["model_type"], m.family);
  for (const auto& [logical, source] : sources) {
    ASSERT_TRUE(ck["sources"].contains(logical)) << name << " " << logical << "\n" << ck.dump();
    EXPECT_EQ(ck["sources"][logical], source) << name << " " << logical;
  }
  for (const auto& v : doc["context"]["verification"]) EXPECT_TRUE(v["ok"].get<bool>()) << v;
}

INSTANTIATE_TEST_SUITE_P(Transformers, FamilyCheckpoint, ::testing::ValuesIn(names()),
                         [](const auto& param_info) { return param_info.param; });

// Checkpoints of the layouts transformers saves but make_tiny_checkpoints.py cannot make here
// (no torch): written by tests/families/make_stacked_checkpoints.py (numpy, transformers'
// names and shapes; config.json by transformers' config class), read at the layer and expert
// its expected.json names: 3-D and flattened expert stacks (GraniteMoE, Llama-4, DBRX), DBRX's
// fused Wqkv, HunYuan-MoE's shared_mlp, MiniCPM3's MLA projections.
const std::filesystem::path kStacked = kDir.parent_path() / "stacked_checkpoints";

const nlohmann::json& stacked_expected() {
  static const nlohmann::json e = [] {
    std::ifstream in(kStacked / "expected.json");
    return nlohmann::json::parse(in);
  }();
  return e;
}

std::vector<std::string> stacked_names() {
  std::vector<std::string> out;
  for (const auto& [name, v] : stacked_expected()["checkpoints"].items()) out.push_back(name);
  return out;
}

class StackedCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(StackedCheckpoint, EachExpertsWeightsAreTheRowsVllmsLoaderCutsAndVerify) {
  const std::string name = GetParam();
  const auto dir = kStacked / name;
  const auto& want_all = stacked_expected()["checkpoints"][name];
  const int layer = want_all["layer"];
  const std::int64_t expert = want_all["expert"];
  const ModelShape m = load_hf_config((dir / "config.json").string());
  const HfLayerWeights w(std::make_shared<Checkpoint>(dir.string()), find_layer_family(m.family), m,
                         layer, expert);
  const auto sources = w.sources();
  for (const auto& [logical, want] : want_all["weights"].items()) {
    ASSERT_TRUE(w.has(logical)) << name << " " << logical;
    WindowRequest r;
    r.name = logical;
    r.logical_rows = r.rows = want["rows"];
    r.logical_cols = r.cols = want["cols"];
    const auto values = w.window(r);
    ASSERT_EQ(values.size(), static_cast<std::size_t>(r.rows * r.cols)) << name << " " << logical;
    for (std::int64_t i = 0; i < r.rows; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < r.cols; ++j) sum += values[i * r.cols + j];
      const double ref = want["row_sums"][i];
      ASSERT_NEAR(sum, ref, 1e-4 + 1e-5 * std::abs(ref)) << name << " " << logical << " row " << i;
    }
    // A routed expert's weight comes from that expert: its own tensor or its slice of a stack.
    if (logical.rfind("w_expert_", 0) == 0) {
      const std::string& source = sources.at(logical);
      const std::string e = std::to_string(expert);
      EXPECT_TRUE(source.find("expert " + e + ":") != std::string::npos ||
                  source.find("experts." + e + ".") != std::string::npos)
          << source;
    }
  }
  const auto report = fusebench::testing::temp_path("stacked_ckpt", name + ".json");
  const std::string expert_flag = m.experts > 0 ? " --expert=" + std::to_string(expert) : "";
  const auto cli = fusebench::testing::run_fusebench(
      "--backend=cpu --weights=" + dir.string() + " --layer=" + std::to_string(layer) +
      expert_flag + " --verify --tokens=1 --timing-max-time=0.01 --report=" + report.string());
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  EXPECT_NE(cli.output.find("verification passed"), std::string::npos) << cli.output;
  const auto doc = fusebench::testing::load_json(report);
  std::filesystem::remove(report);
  const auto& ck = doc["context"]["weights"]["checkpoints"][0];
  for (const auto& [logical, source] : sources) EXPECT_EQ(ck["sources"][logical], source) << name;
  for (const auto& v : doc["context"]["verification"]) EXPECT_TRUE(v["ok"].get<bool>()) << v;
}

INSTANTIATE_TEST_SUITE_P(Script, StackedCheckpoint, ::testing::ValuesIn(stacked_names()),
                         [](const auto& param_info) { return param_info.param; });

TEST(FamilyCheckpoints, AnExpertStackOfAnotherExpertCountIsRefusedNamingTheShape) {
  const auto dir = kStacked / "granitemoeshared";
  ModelShape m = load_hf_config((dir / "config.json").string());
  m.experts = 8;  // the config's 4 experts stacked, read as if there were 8
  std::string why;
  try {
    HfLayerWeights(std::make_shared<Checkpoint>(dir.string()), find_layer_family(m.family), m, 0,
                   5);
  } catch (const CheckpointError& e) {
    why = e.what();
  }
  EXPECT_NE(why.find("block_sparse_moe.input_linear.weight"), std::string::npos) << why;
  EXPECT_NE(why.find("[num_experts, "), std::string::npos) << why;
  EXPECT_NE(why.find("[8, 64, 64]"), std::string::npos) << why;
}

TEST(FamilyCheckpoints, LayoutsVllmCannotLoadAreRefusedNamingTheField) {
  for (const auto& [name, words] : kRefused) {
    ASSERT_TRUE(expected()["checkpoints"].contains(name)) << name;
    const auto cli = fusebench::testing::run_fusebench(
        "--backend=cpu --weights=" + (kDir / name).string() + " --verify --tokens=1");
    EXPECT_EQ(cli.exit_code, 2) << cli.output;
    EXPECT_NE(cli.output.find(words), std::string::npos) << cli.output;
  }
}

TEST(FamilyCheckpoints, CoverTheFusedLayoutsAnMoeAndAMultimodalModel) {
  for (const char* n : {"gpt_neox", "phi3", "falcon_40b_like", "falcon_7b_like", "qwen3_moe",
                        "gemma3", "persimmon", "gpt_bigcode", "gpt2", "qwen3_o_bias"})
    EXPECT_TRUE(expected()["checkpoints"].contains(n)) << n;
  EXPECT_GE(expected()["checkpoints"].size(), 8u);
}

}  // namespace
