// End-to-end: the fusebench binary as a user runs it, on the CPU backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "cli_run.hpp"

namespace {

using fusebench::testing::CliResult;
using fusebench::testing::load_json;

CliResult run(const std::string& args) {
  return fusebench::testing::run_fusebench("--backend=cpu " + args);
}

std::filesystem::path temp_path(const std::string& name) {
  return fusebench::testing::temp_path("fusebench_cli", name);
}

nlohmann::json load(const std::filesystem::path& p) { return load_json(p); }

const nlohmann::json* find_entry(const nlohmann::json& report, const std::string& op,
                                 const std::string& variant, int tokens) {
  for (const auto& b : report["benchmarks"]) {
    if (b["op"] == op && b["variant"] == variant && b["tokens"] == tokens) return &b;
  }
  return nullptr;
}

}  // namespace

TEST(BenchCli, CpuReportHasAllVariantsWithModelLaunchesAndContext) {
  const auto report_path = temp_path("report.json");
  const CliResult r = run("--tokens=1,3 --dtypes=fp32 --verify --report=" + report_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fusebench: backend cpu"), std::string::npos) << r.output;
  const auto report = load(report_path);
  const std::map<std::pair<std::string, std::string>, int> launches = {{{"qkv", "split"}, 3},
                                                                       {{"qkv", "fused"}, 1},
                                                                       {{"gate_up", "split"}, 3},
                                                                       {{"gate_up", "fused"}, 2}};
  for (const auto& [key, expected] : launches) {
    const auto* e = find_entry(report, key.first, key.second, 3);
    ASSERT_NE(e, nullptr) << key.first << "/" << key.second;
    EXPECT_EQ((*e)["model_launches"].get<double>(), expected) << key.first << "/" << key.second;
    EXPECT_GT((*e)["real_time"].get<double>(), 0);
    EXPECT_EQ((*e)["time_unit"], "us");
  }
  const auto& ctx = report["context"];
  for (const char* key : {"backend", "backend_reason", "git_revision", "command_line", "libraries",
                          "cpu_model", "seed", "verification", "num_cpus", "date"}) {
    EXPECT_TRUE(ctx.contains(key)) << key;
  }
  EXPECT_EQ(ctx["backend"], "cpu");
  std::filesystem::remove(report_path);
}

TEST(BenchCli, IndivisibleTpFailsWithClearMessage) {
  const CliResult r = run("--models=qwen3-0.6b --tp=3 --list");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("tp=3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("valid tp sizes: 1, 2, 4, 8, 16"), std::string::npos) << r.output;
}

TEST(BenchCli, UnknownModelListsPresets) {
  const CliResult r = run("--models=gpt-9 --list");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("unknown model 'gpt-9'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("qwen3-0.6b"), std::string::npos) << r.output;
}

TEST(BenchCli, ModelConfigWithQSizeNotHiddenGivesTheRightFlops) {
  const auto dir = temp_path("model");
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"hidden_size": 512, "num_attention_heads": 8,
      "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 1024})";
  const auto report_path = temp_path("cfg.json");
  const CliResult r =
      run("--model-config=" + (dir / "config.json").string() +
          " --ops=qkv --variants=fused --tokens=4 --dtypes=fp32 --report=" + report_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(report_path);
  const auto* e = find_entry(report, "qkv", "fused", 4);
  ASSERT_NE(e, nullptr);
  // q_size = 8*128 = 1024 != hidden 512; kv = 2*128 each.
  EXPECT_EQ((*e)["model_flops"].get<double>(), 2.0 * 4 * (1024 + 2 * 256) * 512);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(report_path);
}

TEST(BenchCli, TpLargerThanKvHeadsShardsLikeVllm) {
  const auto report_path = temp_path("tp16.json");
  const CliResult r = run(
      "--models=qwen3-0.6b --tp=16 --ops=qkv --variants=fused --tokens=2 --dtypes=fp32 --report=" +
      report_path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(report_path);
  const auto* e = find_entry(report, "qkv", "fused", 2);
  ASSERT_NE(e, nullptr);
  // 16 q heads / 16 = 1; 8 kv heads < 16: one kv head per rank (replicated twice).
  EXPECT_EQ((*e)["model_flops"].get<double>(), 2.0 * 2 * (128 + 2 * 128) * 1024);
  std::filesystem::remove(report_path);
}
