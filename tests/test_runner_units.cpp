// The pieces around the sweep, one by one (issue 14): the ETA, the filter's semantics, the
// verification's reference cap, the host cache source, shell quoting, the failure message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fusebench/report.hpp"
#include "fusebench/verify.hpp"
#include "measure/cache_size.hpp"
#include "runner/display.hpp"
#include "runner/filter.hpp"
#include "runner/progress.hpp"
#include "runner/report_writer.hpp"
#include "runner/run_options.hpp"
#include "runner/verification.hpp"

namespace fusebench::bench {
namespace {

TEST(Eta, WeighsTheRemainingFixturesByTheirCost) {
  // Time = 0.5 s + 1 ns per FLOP: small fixtures first, big ones left.
  std::vector<PlannedFixture> done, left;
  std::vector<double> seconds;
  for (double flops : {1e6, 1e7, 3e7, 1e8}) {
    done.push_back({"f", flops, 0});
    seconds.push_back(0.5 + flops * 1e-9);
  }
  for (double flops : {1e9, 4e9}) left.push_back({"f", flops, 0});
  const double want = 2 * 0.5 + 5e9 * 1e-9;  // 6 s
  EXPECT_NEAR(estimate_seconds_left(done, seconds, left), want, 1e-6);
  // What the old ETA said (mean time so far x fixtures left) is far below it.
  const double mean = (seconds[0] + seconds[1] + seconds[2] + seconds[3]) / 4;
  EXPECT_LT(2 * mean, want / 5);
}

TEST(Eta, NeverNegativeAndFallsBackToTheMean) {
  // Durations falling with cost would fit a negative slope: refused, the mean is used instead.
  const std::vector<PlannedFixture> done = {
      {"a", 1e6, 1e3}, {"b", 2e6, 2e3}, {"c", 3e6, 3e3}, {"d", 4e6, 4e3}};
  const std::vector<double> seconds = {2.5, 2.0, 1.0, 0.5};
  const double left = estimate_seconds_left(done, seconds, {{"e", 5e6, 5e3}});
  EXPECT_GE(left, 0);
  EXPECT_NEAR(left, 1.5, 1e-9);
  // Two fixtures are too few for a slope: the mean, not a line through them.
  EXPECT_NEAR(estimate_seconds_left({{"a", 1, 1}, {"b", 2, 2}}, {1.0, 3.0}, {{"c", 100, 100}}), 2.0,
              1e-9);
  EXPECT_EQ(estimate_seconds_left({}, {}, {{"c", 1, 1}}), 0);
  // One finished fixture: the next costs as much again.
  EXPECT_NEAR(estimate_seconds_left({{"a", 5, 5}}, {3.0}, {{"b", 5, 5}, {"c", 5, 5}}), 6.0, 1e-9);
}

TEST(Eta, ProgressCountsEntriesAcrossGroups) {
  std::ostringstream out;
  Progress p({{"a/split", 1, 1, "a"}, {"a/fused", 1, 1, "a"}, {"b/split", 1, 1, "b"}}, out, false);
  p.finished("a/split");
  p.finished("a/fused");
  p.finished("b/split");
  const std::string text = out.str();
  EXPECT_EQ(text.rfind("[1/3] a/split  elapsed", 0), 0u) << text;
  EXPECT_NE(text.find("\n[2/3] a/fused  elapsed"), std::string::npos) << text;
  EXPECT_NE(text.find("\n[3/3] b/split  elapsed"), std::string::npos) << text;
}

TEST(Eta, ProgressLinesArePlainOffATerminal) {
  std::ostringstream out;
  Progress p({{"a", 1, 1}, {"b", 1, 1}}, out, false);
  p.finished("a");
  p.clear();
  p.finished("b");
  p.end();
  const std::string text = out.str();
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos) << text;
  EXPECT_EQ(text.rfind("[1/2] a  elapsed", 0), 0u) << text;
  EXPECT_NE(text.find("\n[2/2] b  elapsed"), std::string::npos) << text;
}

TEST(Eta, OnATerminalOneLineIsRedrawnAndErased) {
  std::ostringstream out;
  Progress p({{"a", 1, 1}, {"b", 1, 1}}, out, true);
  p.finished("a");
  p.clear();
  EXPECT_EQ(out.str().find('\n'), std::string::npos);
  EXPECT_EQ(out.str().substr(out.str().size() - 4), "\r\x1b[K");
  p.finished("b");
  p.end();
  EXPECT_EQ(out.str().back(), '\n');
}

Fixture fixture(const std::string& op, const std::string& variant, std::int64_t tokens) {
  Fixture f;
  f.op = op;
  f.variant = variant;
  f.model = find_model("qwen3-0.6b");
  f.shard = shard(f.model, 1);
  f.tokens = tokens;
  f.dtype = DType::f32;
  f.timing = "eager";
  return f;
}

TEST(Filter, HasGoogleBenchmarksSemantics) {
  const Fixture split1 = fixture("qkv", "split", 1), fused16 = fixture("qkv", "fused", 16);
  EXPECT_TRUE(FixtureFilter("").selects(split1));
  EXPECT_TRUE(FixtureFilter("all").selects(split1));
  // A search anywhere in the full name, Google Benchmark's suffix included.
  EXPECT_TRUE(FixtureFilter("fused").selects(fused16));
  EXPECT_FALSE(FixtureFilter("fused").selects(split1));
  EXPECT_TRUE(FixtureFilter("tokens:1").selects(fused16));
  EXPECT_FALSE(FixtureFilter("tokens:1/").selects(fused16));
  EXPECT_TRUE(FixtureFilter("manual_time$").selects(split1));
  EXPECT_TRUE(FixtureFilter("^qkv/(split|fused)/").selects(fused16));
  // A leading '-' selects what does not match.
  EXPECT_FALSE(FixtureFilter("-fused").selects(fused16));
  EXPECT_TRUE(FixtureFilter("-fused").selects(split1));
  EXPECT_THROW(FixtureFilter("("), std::invalid_argument);
  EXPECT_THROW(select_fixtures({split1}, FixtureFilter("gate_up")), std::invalid_argument);
  EXPECT_EQ(select_fixtures({split1, fused16}, FixtureFilter("fused")).size(), 1u);
}

TEST(Verification, ReferenceRowsFitTheBudget) {
  EXPECT_EQ(reference_rows(1e3, 64), 64);  // cheap: every row
  EXPECT_EQ(reference_rows(kReferenceMacBudget / 10, 64), 10);
  EXPECT_EQ(reference_rows(kReferenceMacBudget * 10, 64), 1);  // never none
  EXPECT_EQ(reference_rows(0, 5), 5);
}

TEST(Verification, CappedReferenceIsTheHeadOfTheWholeOne) {
  // The cap relies on each output row depending on its own input row alone: check it on every
  // single-device op by verifying with and without the cap.
  auto backend = make_cpu_backend();
  ModelShape m;
  m.name = "t";
  m.hidden = 64;
  m.heads = 4;
  m.kv_heads = 2;
  m.head_dim = 16;
  m.intermediate = 96;
  const ShardShape s = shard(m, 1);
  for (const char* op : {"qkv", "gate_up", "tp_attn", "tp_mlp"}) {
    const auto whole = verify_op(*backend, op, s, 9, DType::f32, 7, true);
    const auto head = verify_op(*backend, op, s, 9, DType::f32, 7, true, 4);
    ASSERT_EQ(whole.size(), head.size()) << op;
    for (std::size_t v = 0; v < whole.size(); ++v) {
      EXPECT_EQ(whole[v].reference_rows, 9) << op;
      EXPECT_EQ(head[v].reference_rows, 4) << op;
      EXPECT_TRUE(head[v].ok() && head[v].checked()) << head[v].summary();
      for (std::size_t c = 0; c < head[v].comparisons.size(); ++c) {
        const auto& h = head[v].comparisons[c];
        const auto& w = whole[v].comparisons[c];
        if (h.against != "float64") continue;
        EXPECT_EQ(h.elements * 9, w.elements * 4) << op << " " << h.output;
        EXPECT_LE(h.max_abs_error, w.max_abs_error) << op << " " << h.output;
      }
    }
  }
}

TEST(Verification, ANothingComparedResultIsNeverAPass) {
  const VerifyResult empty{"qkv", "split", {}, 0};
  EXPECT_FALSE(empty.checked());
  EXPECT_EQ(empty.summary().find("OK"), std::string::npos) << empty.summary();
  EXPECT_NE(empty.summary().find("NOT CHECKED"), std::string::npos) << empty.summary();
}

TEST(HostCache, ReadsTheKernelsTopologyAndSaysSo) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("fusebench_cache_" + std::to_string(::getpid()));
  const auto write = [&](const std::string& index, const char* level, const char* type,
                         const char* size) {
    std::filesystem::create_directories(dir / index);
    std::ofstream(dir / index / "level") << level << "\n";
    std::ofstream(dir / index / "type") << type << "\n";
    std::ofstream(dir / index / "size") << size << "\n";
  };
  write("index0", "1", "Data", "48K");
  write("index1", "1", "Instruction", "32K");
  write("index2", "2", "Unified", "1024K");
  write("index3", "3", "Unified", "32768K");
  const auto c = measure::host_last_level_cache(dir.string());
  EXPECT_EQ(c.bytes, std::size_t{32} << 20);
  EXPECT_EQ(c.level, 3);
  EXPECT_NE(c.source.find(dir.string()), std::string::npos) << c.source;
  std::filesystem::remove_all(dir);
  // Without the topology: sysconf, said as such.
  const auto fallback = measure::host_last_level_cache(dir.string());
  if (fallback.bytes > 0) {
    EXPECT_NE(fallback.source.find("sysconf"), std::string::npos) << fallback.source;
  }
}

TEST(Context, CommandLineIsQuotedForTheShell) {
  EXPECT_EQ(shell_quote("--tokens=1,16"), "--tokens=1,16");
  EXPECT_EQ(shell_quote("--benchmark_filter=qkv/.*"), "'--benchmark_filter=qkv/.*'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  const auto ctx = collect_context({}, {"fusebench", "--benchmark_filter=a b", "--tp=2"});
  EXPECT_EQ(ctx["command_line"], "fusebench '--benchmark_filter=a b' --tp=2");
  EXPECT_TRUE(ctx.contains("host_cache"));
}

TEST(Messages, FailureSummaryNamesTheReportOnlyWhenThereIsOne) {
  EXPECT_NE(failure_summary(2, "out.json").find("see error_message in out.json"),
            std::string::npos);
  const std::string none = failure_summary(2, "");
  EXPECT_EQ(none.find("report"), std::string::npos) << none;
  EXPECT_NE(none.find("2 fixture(s) failed"), std::string::npos) << none;
}

TEST(Display, FlagsReadAsGoogleBenchmarkReadsThem) {
  ::unsetenv("BENCHMARK_FORMAT");
  ::unsetenv("BENCHMARK_COLOR");
  ::unsetenv("BENCHMARK_COUNTERS_TABULAR");
  auto o = display_options({"fusebench"});
  EXPECT_EQ(o.format, "console");
  EXPECT_FALSE(o.tabular);
  o = display_options({"fusebench", "--benchmark_color=yes", "--benchmark_counters_tabular"});
  EXPECT_TRUE(o.color);
  EXPECT_TRUE(o.tabular);
  o = display_options({"fusebench", "--benchmark_color=f", "--benchmark_counters_tabular=no"});
  EXPECT_FALSE(o.color);
  EXPECT_FALSE(o.tabular);
  ::setenv("BENCHMARK_FORMAT", "json", 1);
  EXPECT_EQ(display_options({"fusebench"}).format, "json");
  EXPECT_EQ(display_options({"fusebench", "--benchmark_format=csv"}).format, "csv");
  ::unsetenv("BENCHMARK_FORMAT");
  EXPECT_THROW(display_options({"fusebench", "--benchmark_format=xml"}), std::invalid_argument);
  EXPECT_THROW(display_options({"fusebench", "--benchmark_out_format=yaml"}),
               std::invalid_argument);
}

// Issue 36: --comm, --cpu-threads and --timing-blocks become their types once (run_options.hpp);
// the value as given is kept for the report's "requested".
TEST(Options, FlagsBecomeTheirTypesOnce) {
  for (const char* comm : {"auto", "nccl", "modelled", "inprocess", "mpi"})
    EXPECT_STREQ(to_string(parse_comm(comm)), comm);
  EXPECT_EQ(parse_comm("auto"), CommChoice::automatic);
  EXPECT_EQ(Options{}.comm, CommChoice::automatic);
  try {
    parse_comm("gloo");
    ADD_FAILURE() << "--comm=gloo was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "--comm: 'gloo' is invalid (valid: auto, nccl, modelled, inprocess, mpi)");
  }
  EXPECT_TRUE(parse_cpu_threads("auto").is_auto());
  EXPECT_TRUE(Options{}.cpu_threads.is_auto());
  EXPECT_EQ(parse_cpu_threads("1024").count, 1024);
  EXPECT_EQ(parse_cpu_threads("007").count, 7);
  EXPECT_EQ(parse_cpu_threads("007").text, "007");
  for (const char* bad : {"0", "1025", "-1", "", "2.5", "12345", "Auto"})
    EXPECT_THROW(parse_cpu_threads(bad), std::invalid_argument) << bad;
  EXPECT_TRUE(parse_timing_blocks("auto").is_auto());
  EXPECT_EQ(parse_timing_blocks("100").count, 100);
  for (const char* bad : {"0", "101", "abc", "", "1e2"})
    EXPECT_THROW(parse_timing_blocks(bad), std::invalid_argument) << bad;
  try {
    parse_timing_blocks("101");
    ADD_FAILURE() << "--timing-blocks=101 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "--timing-blocks: '101' is invalid (auto, or a whole number of blocks 1..100)");
  }
}

// Issue 36: Google Benchmark reports a fixture's repetitions together, after the fixture's last
// call. Each repetition's entry carries its own call's fields, not the last call's (seen before:
// a repetition's speedup_over with the last one's 6 pairs and no speedup_ci_note, beside its own
// speedup_pairs of 1); an aggregate gets the last call's, as it always did.
TEST(ReportWriter, EachRepetitionCarriesItsOwnCallsFields) {
  const std::string name = "qkv/split/tokens:1";
  EntryFields fields;
  fields.set_base(name, {{"op", "qkv"}, {"variant", "split"}});
  fields.record(name, {{"speedup_over", {{"fused", {{"pairs", 1}}}}}, {"speedup_ci_note", "few"}});
  fields.record(name, {{"speedup_over", {{"fused", {{"pairs", 6}}}}}});
  std::ostringstream progress_out;
  ReportWriter writer("", nlohmann::json::object(), fields,
                      std::make_unique<benchmark::ConsoleReporter>(),
                      Progress({{name, 1, 1, "qkv"}}, progress_out, false));
  std::vector<benchmark::BenchmarkReporter::Run> runs(3);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    runs[i].run_name.function_name = name;
    runs[i].run_name.time_type = "manual_time";
    runs[i].repetitions = 2;
    runs[i].repetition_index = static_cast<std::int64_t>(std::min<std::size_t>(i, 1));
    runs[i].iterations = 1;
  }
  runs[2].run_type = benchmark::BenchmarkReporter::Run::RT_Aggregate;
  runs[2].aggregate_name = "mean";
  runs[2].repetition_index = -1;
  writer.ReportRuns({runs[0], runs[1]});
  writer.ReportRuns({runs[2]});
  const nlohmann::json& e = writer.entries();
  ASSERT_EQ(e.size(), 3u) << e.dump();
  for (const auto& entry : e) EXPECT_EQ(entry["op"], "qkv") << entry.dump();
  EXPECT_EQ(e[0]["speedup_over"]["fused"]["pairs"], 1) << e[0].dump();
  EXPECT_EQ(e[0]["speedup_ci_note"], "few") << e[0].dump();
  EXPECT_EQ(e[1]["speedup_over"]["fused"]["pairs"], 6) << e[1].dump();
  EXPECT_FALSE(e[1].contains("speedup_ci_note")) << e[1].dump();
  EXPECT_EQ(e[2]["speedup_over"]["fused"]["pairs"], 6) << e[2].dump();
  EXPECT_FALSE(e[2].contains("speedup_ci_note")) << e[2].dump();
  // A fixture never called (left out by the filter) keeps main's fields; an unknown one none.
  fields.set_base("gate_up/split", {{"op", "gate_up"}});
  ASSERT_NE(fields.find("gate_up/split", 0), nullptr);
  EXPECT_EQ(*fields.find("gate_up/split", 0), nlohmann::json({{"op", "gate_up"}}));
  EXPECT_EQ(fields.find("moe/split", 0), nullptr);
}

}  // namespace
}  // namespace fusebench::bench
