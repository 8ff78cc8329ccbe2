// End to end on the CPU: the fusebench binary's report keeps timing when the GPU counters are
// unavailable, has launches == model_launches, no DRAM keys, and says why in the context.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace {

nlohmann::json run_fusebench(const std::string& extra, const std::string& tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fusebench_counters_" + tag + "_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = std::string("'") + FUSEBENCH_BIN +
                          "' --backend=cpu --models=qwen3-0.6b --tokens=4 --dtypes=fp32 "
                          "--ops=qkv,gate_up --variants=split,fused --seed=3 --report='" +
                          path.string() + "' " + extra + " > /dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  return nlohmann::json::parse(text.str());
}

}  // namespace

TEST(CounterReport, CpuRunHasLaunchesEqualModelAndNoDramKeys) {
  const nlohmann::json report = run_fusebench("", "on");
  const auto& ctx = report.at("context");
  EXPECT_EQ(ctx.at("counters").at("launches"), "available");
  const std::string dram = ctx.at("counters").at("dram_read_bytes");
  EXPECT_EQ(dram.rfind("unavailable: no device", 0), 0u) << dram;
  EXPECT_TRUE(ctx.at("counter_passes").contains("cupti_api_version"));
  EXPECT_TRUE(ctx.at("counter_definitions").contains("launches"));

  std::set<std::string> seen;
  for (const auto& e : report.at("benchmarks")) {
    if (e.value("run_type", "") != "iteration") continue;
    const std::string name = e.at("name");
    seen.insert(name.substr(0, name.find('/', name.find('/') + 1)));  // "<op>/<variant>"
    EXPECT_GT(e.at("real_time").get<double>(), 0.0) << name;
    ASSERT_TRUE(e.contains("launches")) << name;
    EXPECT_EQ(e.at("launches").get<double>(), e.at("model_launches").get<double>()) << name;
    EXPECT_EQ(e.at("launches_vs_model").get<double>(), 1.0) << name;
    for (const char* key : {"dram_read_bytes", "dram_write_bytes", "l2_bytes", "bytes_vs_model",
                            "profiled_gpu_time_ns", "kernels"}) {
      EXPECT_FALSE(e.contains(key)) << name << " must not report " << key;
      EXPECT_TRUE(e.at("counters_unavailable").contains(key))
          << name << " must say why " << key << " is absent";
    }
  }
  EXPECT_EQ(seen,
            (std::set<std::string>{"qkv/split", "qkv/fused", "gate_up/split", "gate_up/fused"}));
}

TEST(CounterReport, PassesOffKeepTimingAndSayOff) {
  const nlohmann::json report = run_fusebench("--launch-counts=off --dram-counters=off", "off");
  EXPECT_EQ(report.at("context").at("counters").at("launches"),
            "unavailable: off (--launch-counts=off)");
  int entries = 0;
  for (const auto& e : report.at("benchmarks")) {
    if (e.value("run_type", "") != "iteration") continue;
    ++entries;
    EXPECT_GT(e.at("real_time").get<double>(), 0.0);
    EXPECT_FALSE(e.contains("launches"));
    EXPECT_EQ(e.at("counters_unavailable").at("launches"), "off (--launch-counts=off)");
  }
  EXPECT_EQ(entries, 4);
}
