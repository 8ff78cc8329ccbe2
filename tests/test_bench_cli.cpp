// End-to-end: the fusebench binary as a user runs it, on the CPU backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

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
  std::ofstream(dir / "config.json")
      << R"({"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
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

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    lines.push_back(text.substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

// A quick one-op run: each entry stops after 0.05 s.
const char* kQuick = "--ops=qkv --dtypes=fp32 --timing-max-time=0.05 --timing-min-time=0.01 ";

}  // namespace

// Issue 14 item 3: aggregates in --report are what Google Benchmark's own JSON says, including
// the percentage aggregate _cv (a ratio, not a time).
TEST(BenchCli, AggregatesMatchGoogleBenchmarksOwnJson) {
  const auto ours = temp_path("agg_ours.json"), theirs = temp_path("agg_gbench.json");
  const CliResult r =
      run(std::string(kQuick) + "--variants=fused --tokens=2 --benchmark_repetitions=3 --report=" +
          ours.string() + " --benchmark_out=" + theirs.string() + " --benchmark_out_format=json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Google Benchmark writes non-finite counters as NaN/inf (a CV of a constant): read them as
  // null, as a strict parser cannot.
  std::ifstream in(theirs);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto a = load(ours), b = nlohmann::json::parse(std::regex_replace(
                                 text, std::regex(R"(: -?(nan|NaN|inf|Infinity)\b)"), ": null"));
  int aggregates = 0;
  bool saw_cv = false;
  std::map<std::string, double> aggregate;  // our real_time per aggregate name
  // Both reporters see the same runs in the same order.
  ASSERT_EQ(a["benchmarks"].size(), b["benchmarks"].size());
  for (std::size_t i = 0; i < b["benchmarks"].size(); ++i) {
    const auto& g = b["benchmarks"][i];
    const auto* e = &a["benchmarks"][i];
    ASSERT_EQ((*e)["name"], g["name"]);
    EXPECT_EQ((*e)["run_type"], g["run_type"]) << g["name"];
    for (const char* key : {"real_time", "cpu_time"}) {
      const double want = g[key].get<double>(), got = (*e)[key].get<double>();
      EXPECT_NEAR(got, want, 1e-9 * std::abs(want) + 1e-12) << g["name"] << " " << key;
    }
    EXPECT_EQ((*e)["time_unit"], g["time_unit"]) << g["name"];
    if (g["run_type"] == "aggregate") {
      ++aggregates;
      EXPECT_EQ((*e)["aggregate_unit"], g["aggregate_unit"]) << g["name"];
      if (g["aggregate_name"] == "cv") saw_cv = true;
      aggregate[g["aggregate_name"].get<std::string>()] = (*e)["real_time"].get<double>();
    }
  }
  EXPECT_EQ(aggregates, 4);  // mean, median, stddev, cv
  EXPECT_TRUE(saw_cv);
  // The CV is a ratio of our own aggregates (issue 14 item 3 wrote 6331.6 here), whatever the
  // machine's load made the spread.
  EXPECT_NEAR(aggregate["cv"], aggregate["stddev"] / aggregate["mean"], 1e-9 * aggregate["cv"]);
  std::filesystem::remove(ours);
  std::filesystem::remove(theirs);
}

// Issue 14 item 4: --verify checks the run's own token counts, and every variant (the split
// baseline too) is compared with something.
TEST(BenchCli, VerifyChecksTheRunsTokenCountsAndNeverPassesOnNothing) {
  const auto path = temp_path("verify_tokens.json");
  const CliResult r = run(std::string(kQuick) + "--tokens=5,9 --verify --report=" + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  const auto& v = report["context"]["verification"];
  ASSERT_TRUE(v.is_array()) << v.dump(2);
  std::set<std::int64_t> tokens;
  for (const auto& e : v) {
    tokens.insert(e["tokens"].get<std::int64_t>());
    ASSERT_TRUE(e.contains("comparisons")) << e.dump(2);
    EXPECT_FALSE(e["comparisons"].empty()) << e.dump(2);
    bool against_float64 = false;
    for (const auto& c : e["comparisons"]) against_float64 |= c["against"] == "float64";
    EXPECT_TRUE(against_float64) << e.dump(2);
  }
  EXPECT_EQ(tokens, (std::set<std::int64_t>{5, 9}));
  EXPECT_EQ(r.output.find("nothing to compare against"), std::string::npos) << r.output;
  std::filesystem::remove(path);
}

// --verify-only: the verification of --verify, then the run ends: its report holds the context
// with every variant's result and no entry (nothing was timed); with --list it is refused.
TEST(BenchCli, VerifyOnlyVerifiesAndTimesNothing) {
  const auto path = temp_path("verify_only.json");
  const CliResult r =
      run(std::string(kQuick) + "--tokens=3 --verify-only --report=" + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("verification passed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nothing timed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("manual_time"), std::string::npos) << r.output;  // no entry row
  const auto report = load(path);
  EXPECT_TRUE(report["benchmarks"].empty());
  EXPECT_FALSE(report["context"]["verification"].empty());
  EXPECT_EQ(report["context"]["interrupted"], false);
  std::filesystem::remove(path);
  const CliResult listed = run(std::string(kQuick) + "--verify-only --list");
  EXPECT_EQ(listed.exit_code, 2) << listed.output;
  EXPECT_NE(listed.output.find("--list and --verify-only"), std::string::npos) << listed.output;
}

TEST(BenchCli, VerifyCapsTheFloat64ReferenceByWorkAndSaysSo) {
  const auto path = temp_path("verify_capped.json");
  // llama3-8b qkv: 25M multiply-adds per token row; the float64 reference covers some rows.
  const CliResult r = run(std::string(kQuick) +
                          "--models=llama3-8b --tokens=37 --verify "
                          "--benchmark_filter=qkv/fused/ --report=" +
                          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  const auto& v = report["context"]["verification"];
  bool saw_split = false;
  for (const auto& e : v) {
    EXPECT_EQ(e["tokens"], 37);
    const auto rows = e["float64_reference_rows"].get<std::int64_t>();
    EXPECT_GE(rows, 1) << e.dump(2);
    EXPECT_LT(rows, 37) << e.dump(2);
    if (e["variant"] == "split") {
      saw_split = true;
      EXPECT_FALSE(e["comparisons"].empty()) << e.dump(2);
    }
  }
  EXPECT_TRUE(saw_split) << v.dump(2);
  EXPECT_NE(r.output.find("of 37 rows"), std::string::npos) << r.output;
  std::filesystem::remove(path);
}

// Issue 14 item 5: the command line in the report reproduces the run, Google Benchmark's flags
// included (its Initialize removes them from argv).
TEST(BenchCli, CommandLineKeepsGoogleBenchmarkFlags) {
  const auto path = temp_path("cmdline.json");
  const CliResult r = run(std::string(kQuick) +
                          "--tokens=2,3 '--benchmark_filter=qkv/fused/.*tokens:2/' "
                          "--benchmark_repetitions=1 --report=" +
                          path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto report = load(path);
  const std::string cmd = report["context"]["command_line"];
  EXPECT_NE(cmd.find("'--benchmark_filter=qkv/fused/.*tokens:2/'"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--benchmark_repetitions=1"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--tokens=2,3"), std::string::npos) << cmd;
  EXPECT_EQ(report["benchmarks"].size(), 1u) << report["benchmarks"].dump(1);
  std::filesystem::remove(path);
}

// Issue 14 items 8, 9: through a pipe, no escape codes; a progress line never lands inside a
// result row, and follows the row of its fixture.
TEST(BenchCli, PipedOutputIsPlainAndProgressFollowsItsRow) {
  const CliResult r = run(std::string(kQuick) + "--tokens=1,2,3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << r.output;
  int progress = 0;
  std::set<std::string> rows_seen;
  for (const auto& line : lines_of(r.output)) {
    if (line.find("/manual_time") != std::string::npos) {
      EXPECT_EQ(line.rfind("qkv/", 0), 0u) << "row does not start with its name: " << line;
      EXPECT_EQ(line.find("elapsed"), std::string::npos) << line;
      rows_seen.insert(line.substr(0, line.find("/iterations:1")));
    }
    // Lines of blocks being measured name their group, not a row.
    if (line.rfind("measuring ", 0) == 0) {
      EXPECT_NE(line.find("elapsed"), std::string::npos) << line;
      continue;
    }
    if (line.find("elapsed") != std::string::npos) {
      ++progress;
      EXPECT_EQ(line.front(), '[') << line;
      const auto name_at = line.find("] ") + 2;
      const std::string name = line.substr(name_at, line.find(' ', name_at) - name_at);
      EXPECT_EQ(rows_seen.count(name), 1u) << "progress before its row: " << line << "\n"
                                           << r.output;
    }
  }
  EXPECT_EQ(progress, 6);
}

TEST(BenchCli, GoogleBenchmarkDisplayFlagsAreHonoured) {
  const std::string base = std::string(kQuick) + "--variants=fused --tokens=2 ";
  // Colour on request even through a pipe.
  CliResult r = run(base + "--benchmark_color=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find('\x1b'), std::string::npos) << r.output;
  // Counters as name=value unless tabular is asked for (Google Benchmark's default).
  r = run(base + "--benchmark_counters_tabular=false");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model_launches=1"), std::string::npos) << r.output;
  r = run(base + "--benchmark_counters_tabular=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("model_launches=1"), std::string::npos) << r.output;
  // JSON on stdout, progress and notes on stderr.
  const auto out = temp_path("display.json");
  const std::string bin = std::string(FUSEBENCH_BIN_DIR) + "/fusebench --backend=cpu ";
  r = fusebench::testing::run_command(bin + base + "--benchmark_format=json 2>/dev/null >" +
                                      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto json = load(out);
  EXPECT_EQ(json["benchmarks"].size(), 1u) << json.dump(1);
  // CSV.
  r = fusebench::testing::run_command(bin + base + "--benchmark_format=csv 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("name,iterations,real_time", 0), 0u) << r.output;
  // Anything else is refused, naming the valid values.
  r = run(base + "--benchmark_format=xml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("console, json, csv"), std::string::npos) << r.output;
  std::filesystem::remove(out);
}

// Issue 14 item 15: the Debian library's DEBUG warning is explained once, and the context says
// what the library and this binary were built as.
TEST(BenchCli, LibraryBuildTypeIsExplainedNotContradicted) {
  const auto path = temp_path("buildtype.json");
  const CliResult r =
      run(std::string(kQuick) + "--variants=fused --tokens=2 --report=" + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ctx = load(path)["context"];
  EXPECT_TRUE(ctx.contains("fusebench_build_type")) << ctx.dump(1);
  EXPECT_EQ(r.output.find("***WARNING*** Library was built as DEBUG"), std::string::npos)
      << r.output;
  if (ctx["library_build_type"] == "debug") {
    EXPECT_NE(r.output.find("built without NDEBUG"), std::string::npos) << r.output;
  }
  std::filesystem::remove(path);
}

// Issue 14 item 10: --list and the progress counter honour --benchmark_filter, with Google
// Benchmark's semantics (a search, not a full match; a leading '-' negates).
TEST(BenchCli, ListAndProgressHonourTheFilter) {
  const auto names = [](const std::string& output) {
    std::vector<std::string> out;
    for (const auto& line : lines_of(output)) {
      if (line.rfind("qkv/", 0) == 0) out.push_back(line);
    }
    return out;
  };
  CliResult r = run("--ops=qkv --tokens=1,2 --dtypes=fp32 --list --benchmark_filter=fused/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(names(r.output).size(), 2u) << r.output;
  r = run("--ops=qkv --tokens=1,2 --dtypes=fp32 --list --benchmark_filter=-fused/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(names(r.output).size(), 2u) << r.output;
  EXPECT_EQ(r.output.find("fused"), std::string::npos) << r.output;
  // A search, not a whole match: "tokens:1/" selects tokens 1 only, "tokens:1" 1 and 16.
  r = run("--ops=qkv --tokens=1,16 --dtypes=fp32 --list --benchmark_filter=tokens:1/");
  EXPECT_EQ(names(r.output).size(), 2u) << r.output;
  r = run("--ops=qkv --tokens=1,16 --dtypes=fp32 --list --benchmark_filter=tokens:1");
  EXPECT_EQ(names(r.output).size(), 4u) << r.output;
  r = run(std::string(kQuick) + "--tokens=1,2 --benchmark_filter=fused/");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[2/2] qkv/fused"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[1/4]"), std::string::npos) << r.output;
  // A filter that selects nothing, or does not compile, is bad input.
  r = run("--ops=qkv --list --benchmark_filter=nothing-like-this");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run("--ops=qkv --list '--benchmark_filter=('");
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

// Issue 23: a report path that cannot take a report is refused before anything is measured,
// naming the value and what is valid; missing directories are created, and said.
TEST(BenchCli, ReportPathIsCheckedBeforeMeasuring) {
  const auto dir = temp_path("report_dir");
  std::filesystem::create_directories(dir);
  CliResult r = run(std::string(kQuick) + "--variants=fused --tokens=2 --report=" + dir.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--report=" + dir.string() + " is a directory: give a file path"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("manual_time"), std::string::npos) << "measured first: " << r.output;
  const auto nested = dir / "new" / "sub" / "r.json";
  r = run(std::string(kQuick) + "--variants=fused --tokens=2 --report=" + nested.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(
      r.output.find("fusebench: creating directory " + (dir / "new").string() + " for --report"),
      std::string::npos)
      << r.output;
  // A run that went through its sweep says so: interrupted false, no note.
  const auto ctx = load(nested)["context"];
  EXPECT_EQ(ctx["interrupted"], false) << ctx.dump(1);
  EXPECT_FALSE(ctx.contains("interrupted_note")) << ctx.dump(1);
  std::filesystem::remove_all(dir);
}

// Issue 23: colour only on a colour terminal, and not with NO_COLOR (https://no-color.org).
// stdout on a pseudo-terminal (script(1)), stderr (the progress line) to /dev/null.
TEST(BenchCli, ColourOnlyOnATerminalAndNeverWithNoColor) {
  if (fusebench::testing::run_command("command -v script >/dev/null 2>&1").exit_code != 0)
    GTEST_SKIP() << "script(1) (util-linux) is not installed: no pseudo-terminal to test with";
  const std::string cmd = std::string(FUSEBENCH_BIN_DIR) + "/fusebench --backend=cpu " + kQuick +
                          "--variants=fused --tokens=2 2>/dev/null";
  const auto on_pty = [&](const std::string& env) {
    return fusebench::testing::run_command("TERM=xterm-256color " + env + " script -qec '" + cmd +
                                           "' /dev/null");
  };
  CliResult r = on_pty("");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("manual_time"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\x1b["), std::string::npos) << "no colour on a terminal: " << r.output;
  r = on_pty("NO_COLOR=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("manual_time"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "colour with NO_COLOR: " << r.output;
  // Under a launcher (mpirun's rank variable, without its world size: no MPI is started) the
  // pseudo-terminal is the launcher's, whose output may go to a file: no colour either.
  r = on_pty("OMPI_COMM_WORLD_RANK=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(r.output.find("manual_time"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\x1b'), std::string::npos) << "colour under a launcher: " << r.output;
}

// Issue 23: without a GPU driver every run printed CUDA's "driver version is insufficient for
// CUDA runtime version"; the backend line now says what it means.
TEST(BenchCli, NoGpuDriverIsSaidInWords) {
  const CliResult r =
      fusebench::testing::run_fusebench("--list --ops=qkv --tokens=1 --dtypes=fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (r.output.find("fusebench: backend cuda") != std::string::npos)
    GTEST_SKIP() << "a GPU is usable here: " << r.output.substr(0, r.output.find('\n'));
  EXPECT_EQ(r.output.find("driver version is insufficient"), std::string::npos) << r.output;
  if (r.output.find("this build has no CUDA backend") != std::string::npos)
    GTEST_SKIP() << "built without CUDA: no driver is looked for";
  if (!std::filesystem::exists("/proc/driver/nvidia/version")) {  // no kernel driver loaded
    EXPECT_NE(r.output.find("fusebench: backend cpu (no NVIDIA driver found"), std::string::npos)
        << r.output;
  }
}

// Issue 23: the verification table showed "max rel error 0.154, ok=yes" beside rtol 1e-4 without
// saying atol passed it: each result and comparison says which tolerance decided.
TEST(BenchCli, VerificationSaysWhichToleranceDecided) {
  const auto path = temp_path("verify_within.json");
  const CliResult r = run(std::string(kQuick) + "--tokens=3 --verify --report=" + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(", within "), std::string::npos) << r.output;
  const auto report = load(path);
  ASSERT_FALSE(report["context"]["verification"].empty());
  EXPECT_NE(report["context"]["verification_policy"]["tolerance"].get<std::string>().find(
                "atol + rtol*|want|"),
            std::string::npos);
  for (const auto& v : report["context"]["verification"]) {
    ASSERT_TRUE(v.contains("within")) << v.dump();
    EXPECT_GT(v["atol"].get<double>(), 0) << v.dump();
    std::int64_t by_atol = 0;
    for (const auto& c : v["comparisons"]) {
      by_atol += c["elements_within_atol_only"].get<std::int64_t>();
      // A passing comparison whose relative error exceeds rtol was passed by atol.
      if (c["mismatches"] == 0 && c["max_rel_error"].get<double>() > c["rtol"].get<double>()) {
        EXPECT_EQ(c["within"], "atol") << c.dump();
      }
      if (c["mismatches"] == 0 && c["elements_within_atol_only"] == 0) {
        EXPECT_EQ(c["within"], "rtol") << c.dump();
      }
    }
    EXPECT_EQ(v["elements_within_atol_only"], by_atol) << v.dump();
    EXPECT_EQ(v["within"], by_atol > 0 ? "atol" : "rtol") << v.dump();
  }
  std::filesystem::remove(path);
}
