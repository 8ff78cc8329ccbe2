// The regression gate's timing and counter rules end to end through run_cli: time and its noise,
// the speedup intervals, exact and byte counters, missing and new entries, what is not judged.
#include <gtest/gtest.h>

#include <fstream>

#include "fusebench/gate.hpp"
#include "gate_fixture.hpp"

using fusebench::test::entry;
using fusebench::test::Gate;
using fusebench::test::kA;
using fusebench::test::kB;
using fusebench::test::report;
using fusebench::test::timed;
using nlohmann::json;

TEST_F(Gate, IdenticalReportsPass) {
  const json r = report({entry(kA, 10), entry(kB, 8)});
  EXPECT_EQ(run(r, r), 0) << out << err;
  EXPECT_NE(out.find("PASS"), std::string::npos);
  EXPECT_NE(out.find("2 benchmarks compared"), std::string::npos);
}

TEST_F(Gate, SlowerBeyondThresholdFails) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10.7)})), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos);
  EXPECT_NE(out.find("+7.0%"), std::string::npos);
  // The threshold is a flag.
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10.7)}), {"--time-threshold=10"}), 0)
      << out;
}

TEST_F(Gate, SlowerWithinThresholdPasses) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10.4)})), 0) << out;
}

TEST_F(Gate, SlowerWithinMeasuredNoisePasses) {
  // cv 5% in each run, sample count unknown: each time's interval is +-2 CVs on the log scale, the
  // ratio's sqrt(2) x 10% = 14.1%: +10% lies within it ([0.955, 1.267] overlaps the threshold
  // band).
  const json cv = {{"cv", 0.05}};
  EXPECT_EQ(run(report({entry(kA, 10, cv)}), report({entry(kA, 11, cv)})), 0) << out;
  EXPECT_NE(out.find("ratio 1.100 [0.955, 1.267] overlaps [0.952, 1.050]"), std::string::npos)
      << out;
  EXPECT_NE(out.find("baseline 2 x entry cv 5.0%"), std::string::npos) << out;
  // +20%: the interval [1.042, 1.382] still reaches below 1.05; +30% lies wholly above.
  EXPECT_EQ(run(report({entry(kA, 10, cv)}), report({entry(kA, 12, cv)})), 0) << out;
  EXPECT_EQ(run(report({entry(kA, 10, cv)}), report({entry(kA, 13, cv)})), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
  // With a sample count the CV is the spread of one sample: the median of 100 is 8x tighter.
  const json cv_n = {{"cv", 0.05}, {"samples", 100}};
  EXPECT_EQ(run(report({entry(kA, 10, cv_n)}), report({entry(kA, 11, cv_n)})), 1) << out;
  EXPECT_NE(out.find("x 1.25 / sqrt(100)"), std::string::npos) << out;
}

TEST_F(Gate, NoiseFromRepetitionsAndMedianAggregate) {
  auto rep = [](double us, int i) {
    json e = entry(kA, us, {{"repetitions", 3}, {"repetition_index", i}});
    return e;
  };
  auto agg = [](const std::string& name, double v, const std::string& unit = "time") {
    return json{{"name", kA + "_" + name}, {"run_name", kA},         {"run_type", "aggregate"},
                {"aggregate_name", name},  {"aggregate_unit", unit}, {"real_time", v},
                {"time_unit", "us"},       {"iterations", 3}};
  };
  // Baseline median 10, current median 11 (+10%); the repetitions' cv 8% over 3 values each:
  // a median's interval of +-2 x 1.25 x 8% / sqrt(3) = 11.6%, the ratio's [0.934, 1.296]: pass.
  const json base =
      report({rep(9, 0), rep(10, 1), rep(11, 2), agg("median", 10), agg("cv", 0.08, "percentage")});
  const json cur = report(
      {rep(10, 0), rep(11, 1), rep(12, 2), agg("median", 11), agg("cv", 0.08, "percentage")});
  EXPECT_EQ(run(base, cur), 0) << out;
  EXPECT_NE(out.find("ratio 1.100 [0.934, 1.296]"), std::string::npos) << out;
  EXPECT_NE(out.find("2 x repetitions cv 8.0% x 1.25 / sqrt(3)"), std::string::npos) << out;
  // Without aggregates the spread of the repetitions is used: stddev/mean of {9,10,11} = 10%, of
  // {10,11,12} = 9.09%.
  EXPECT_EQ(run(report({rep(9, 0), rep(10, 1), rep(11, 2)}),
                report({rep(10, 0), rep(11, 1), rep(12, 2)})),
            0);
  EXPECT_NE(out.find("ratio 1.100 [0.905, 1.338]"), std::string::npos) << out;
  EXPECT_NE(out.find("2 x repetitions cv 10.0% x 1.25 / sqrt(3)"), std::string::npos) << out;
}

// Issue 23: entries timed on a loaded CPU, with their medians' intervals (timed()).
TEST_F(Gate, FortyTimesFasterIsReportedFasterWhateverTheCv) {
  // CVs of 100% (the CPU reports'), medians known to +-10%: 40x faster is FASTER.
  const json base = report({timed(1000, 1.0, 0.10)}), cur = report({timed(25, 1.0, 0.10)});
  EXPECT_EQ(run(base, cur), 0) << out;
  EXPECT_NE(out.find("FASTER"), std::string::npos) << out;
  EXPECT_NE(out.find("-97.5%: ratio 0.025 ["), std::string::npos) << out;
  EXPECT_NE(out.find("median 95% interval"), std::string::npos) << out;
  // ... and 40x slower fails.
  EXPECT_EQ(run(cur, base), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
  // Without the median intervals and without a sample count, the CVs alone (the old reports'
  // case) still report it: on the log scale 40x is 3.7 and the band 2 x sqrt(2) x 100% = 2.8.
  const json cv_only_base = report({entry(kA, 1000, {{"time_cv", 1.0}})});
  const json cv_only_cur = report({entry(kA, 25, {{"time_cv", 1.0}})});
  EXPECT_EQ(run(cv_only_base, cv_only_cur), 0) << out;
  EXPECT_NE(out.find("FASTER"), std::string::npos) << out;
}

TEST_F(Gate, IdenticalNoisyReportsAndNoiseStayOk) {
  const json noisy = report({timed(1000, 1.0, 0.40)});
  EXPECT_EQ(run(noisy, noisy), 0) << out;
  EXPECT_EQ(out.find("FASTER"), std::string::npos) << out;
  EXPECT_NE(out.find("+0.0%: ratio 1.000 ["), std::string::npos) << out;
  // +30% with medians known to +-40% only: the ratio's interval spans 1: noise, not a change.
  EXPECT_EQ(run(noisy, report({timed(1300, 1.0, 0.40)})), 0) << out;
  EXPECT_EQ(out.find("SLOWER"), std::string::npos) << out;
  // The same +30% with tight medians is SLOWER on a GPU report (threshold 5%) ...
  EXPECT_EQ(run(report({timed(1000, 1.0, 0.02)}), report({timed(1300, 1.0, 0.02)})), 1) << out;
  EXPECT_NE(
      out.find("threshold 5.0% per entry, 5.0% for the geometric mean of all (the GPU default"),
      std::string::npos)
      << out;
}

TEST_F(Gate, CpuReportsAllowForTheirDriftBetweenRuns) {
  // The CPU default threshold (15%, docs/gate.md "Thresholds", measured on same-binary pairs):
  // 1.1x is ok there, 1.3x of an entry whose interval is +-2% fails.
  auto cpu = [](std::vector<json> entries) {  // not json: {x} would copy x under clang
    json r = report(entries);
    r["context"] = fusebench::test::context();
    return r;
  };
  const json base = cpu({timed(1000, 0.3, 0.02)});
  EXPECT_EQ(run(base, cpu({timed(1100, 0.3, 0.02)})), 0) << out;
  EXPECT_NE(
      out.find("threshold 15.0% per entry, 7.0% for the geometric mean of all (the CPU default"),
      std::string::npos)
      << out;
  EXPECT_EQ(run(base, cpu({timed(1300, 0.3, 0.02)})), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
  // An explicit threshold wins.
  EXPECT_EQ(run(base, cpu({timed(1100, 0.3, 0.02)}), {"--time-threshold=5"}), 1) << out;
  EXPECT_NE(
      out.find("threshold 5.0% per entry, 5.0% for the geometric mean of all (--time-threshold"),
      std::string::npos)
      << out;
}

TEST_F(Gate, AnInterruptedReportIsSaidToBePartialAndItsAbsentEntriesFail) {
  const json base = report({timed(1000, 0.3, 0.02), entry("qkv/split/b", 1000)});
  json partial = report({timed(1000, 0.3, 0.02)});
  partial["context"]["interrupted"] = true;
  partial["context"]["interrupted_note"] = "stopped by SIGINT after 1 of 2 entries";
  EXPECT_EQ(run(base, partial), 1) << out;
  EXPECT_NE(out.find("context: the current report is partial (context.interrupted: stopped by "
                     "SIGINT after 1 of 2 entries)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("MISSING"), std::string::npos) << out;
  // Issue 28 case 2: every entry present, but the run was interrupted: NOT JUDGED, exit 3.
  json whole = base;
  whole["context"] = partial["context"];
  EXPECT_EQ(run(base, whole), 3) << out;
  EXPECT_NE(out.find("NOT JUDGED (the current report is partial (context.interrupted"),
            std::string::npos)
      << out;
  partial["context"]["interrupted"] = false;
  run(base, partial);
  EXPECT_EQ(out.find("is partial"), std::string::npos) << out;
}

TEST_F(Gate, DifferentCpuThreadCountsAreNotJudgedOnTime) {
  auto with_threads = [](json r, int threads) {
    r["context"] = fusebench::test::context();
    r["context"]["cpu_threads"] = {{"requested", "auto"},
                                   {"threads", threads},
                                   {"reason", "auto: " + std::to_string(threads) + " cores free"}};
    return r;
  };
  const json base = with_threads(report({timed(1000, 0.3, 0.02)}), 2);
  const json slow = with_threads(report({timed(4000, 0.3, 0.02)}), 1);
  const auto md = (dir / "summary.md").string();
  // Issue 28 case 1: not judged on time is NOT JUDGED, exit 3, never PASS.
  EXPECT_EQ(run(base, slow, {"--summary-md", md}), 3) << out;
  EXPECT_NE(out.find("NOT JUDGED (time, speedup and advice rules off: the reports ran with "
                     "different CPU thread counts (baseline 2, current 1)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find(": PASS"), std::string::npos) << out;
  EXPECT_NE(out.find("context: CPU threads differ: baseline 2 (auto: 2 cores free), current 1"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("time rule (the ratio's 95% interval wholly beyond the threshold): not "
                     "applied: the reports ran with different CPU thread counts (baseline 2, "
                     "current 1)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("advice rule (a `use:` decision that flipped fails): not applied: the "
                     "reports ran with different CPU thread counts"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("SLOWER"), std::string::npos) << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Context: CPU threads differ: baseline 2"), std::string::npos) << text;
  EXPECT_NE(text.find("## fusebench gate: NOT JUDGED"), std::string::npos) << text;
  EXPECT_EQ(text.find("No regressions"), std::string::npos) << text;
  // Asked for, NOT JUDGED passes, and says so.
  EXPECT_EQ(run(base, slow, {"--allow-unjudged"}), 0) << out;
  EXPECT_NE(out.find("passed by --allow-unjudged"), std::string::npos) << out;
  // Counters are still gated.
  json changed = slow;
  changed["benchmarks"][0]["launches"] = 4.0;
  EXPECT_EQ(run(base, changed), 1) << out;
  EXPECT_NE(out.find("CHANGED"), std::string::npos) << out;
  // Asked for, time is judged: 4x slower fails.
  EXPECT_EQ(run(base, slow, {"--allow-thread-mismatch"}), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
  EXPECT_NE(out.find("context: CPU threads differ"), std::string::npos) << out;
  // The same thread count: no note. One report without a count: a note, time judged.
  EXPECT_EQ(run(base, base), 0) << out;
  EXPECT_EQ(out.find("context:"), std::string::npos) << out;
  json unknown = slow;
  unknown["context"].erase("cpu_threads");
  EXPECT_EQ(run(base, unknown), 1) << out;
  EXPECT_NE(out.find("context: current records no CPU thread count"), std::string::npos) << out;
}

TEST_F(Gate, DifferentCpuThreadsPerRankAreNotJudgedOnTime) {
  // A multi-process run records each rank's threads per entry (cpu_threads_per_rank).
  const json base = report({timed(1000, 0.3, 0.02, {{"cpu_threads_per_rank", 2}})});
  const json slow = report({timed(4000, 0.3, 0.02, {{"cpu_threads_per_rank", 1}})});
  EXPECT_EQ(run(base, slow), 3) << out;
  EXPECT_NE(out.find("not judged: CPU threads per rank differ (baseline 2, current 1; "
                     "--allow-thread-mismatch)"),
            std::string::npos)
      << out;
  EXPECT_EQ(run(base, slow, {"--allow-thread-mismatch"}), 1) << out;
  EXPECT_NE(out.find("SLOWER"), std::string::npos) << out;
}

TEST_F(Gate, FasterIsReportedNotFailed) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 5)})), 0) << out;
  EXPECT_NE(out.find("FASTER"), std::string::npos);
  EXPECT_NE(out.find("1 faster"), std::string::npos);
}

TEST_F(Gate, TimeUnitsAreConverted) {
  json cur = entry(kA, 10000);
  cur["time_unit"] = "ns";
  EXPECT_EQ(run(report({entry(kA, 10)}), report({cur})), 0) << out;
}

TEST_F(Gate, ExactCounterChangeFails) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"launches", 4.0}})})), 1) << out;
  EXPECT_NE(out.find("CHANGED"), std::string::npos);
  EXPECT_NE(out.find("launches"), std::string::npos);
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"kernels", 2.0}})})), 1) << out;
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"model_launches", 1.0}})})), 1)
      << out;
  // A tolerance makes it pass: 3 -> 4 is 33%.
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"launches", 4.0}})}),
                {"--exact-tolerance=40"}),
            0);
}

TEST_F(Gate, BytesWithinToleranceOnly) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"dram_read_bytes", 1.015e6}})})),
            0)
      << out;
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"dram_read_bytes", 1.03e6}})})), 1)
      << out;
  EXPECT_NE(out.find("dram_read_bytes"), std::string::npos);
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"dram_read_bytes", 0.95e6}})})), 1)
      << out;
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10, {{"dram_read_bytes", 1.03e6}})}),
                {"--bytes-tolerance=5"}),
            0);
}

TEST_F(Gate, DerivedCountersAreNotGated) {
  EXPECT_EQ(run(report({entry(kA, 10, {{"bytes_per_second", 1e9}, {"launches_vs_model", 1.0}})}),
                report({entry(kA, 10, {{"bytes_per_second", 5e9}, {"launches_vs_model", 2.0}})})),
            0)
      << out;
}

TEST_F(Gate, MissingBenchmarkFailsNewIsReported) {
  EXPECT_EQ(run(report({entry(kA, 10), entry(kB, 8)}), report({entry(kA, 10)})), 1) << out;
  EXPECT_NE(out.find("MISSING"), std::string::npos);
  EXPECT_NE(out.find(kB), std::string::npos);
  // Coverage (issue 28 case 7): an entry the baseline lacks is ungated: it fails unless allowed.
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10), entry(kB, 8)})), 1) << out;
  EXPECT_NE(out.find("NEW      " + kB), std::string::npos) << out;
  EXPECT_NE(out.find("not in baseline: ungated"), std::string::npos) << out;
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10), entry(kB, 8)}), {"--allow-new"}), 0)
      << out;
  EXPECT_NE(out.find("1 new"), std::string::npos);
}

TEST_F(Gate, MissingCounterFailsUnlessAllowed) {
  json cur = entry(kA, 10);
  cur.erase("dram_read_bytes");
  EXPECT_EQ(run(report({entry(kA, 10)}), report({cur})), 1) << out;
  EXPECT_NE(out.find("counter absent"), std::string::npos);
  EXPECT_EQ(run(report({entry(kA, 10)}), report({cur}), {"--allow-missing-counters"}), 0) << out;
}

TEST_F(Gate, FailedRunFails) {
  json cur = {{"name", kA},
              {"run_name", kA},
              {"run_type", "iteration"},
              {"error_occurred", true},
              {"error_message", "cublasLt: no algorithm"},
              {"iterations", 0},
              {"real_time", 0},
              {"time_unit", "us"}};
  EXPECT_EQ(run(report({entry(kA, 10)}), report({cur})), 1) << out;
  EXPECT_NE(out.find("no algorithm"), std::string::npos);
}

TEST_F(Gate, DeviceMismatchRefusedUnlessAllowed) {
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10)}, "NVIDIA H100 80GB HBM3")), 2);
  EXPECT_NE(err.find("device mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("H100"), std::string::npos) << err;
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 10)}, "NVIDIA H100 80GB HBM3"),
                {"--allow-device-mismatch"}),
            0);
  json cpu = report({entry(kA, 10)});
  cpu["context"] = {{"backend", "cpu"}, {"cpu_model", "AMD EPYC"}};
  EXPECT_EQ(run(report({entry(kA, 10)}), cpu), 2);
}

TEST_F(Gate, SummaryMarkdownWritten) {
  const auto md = (dir / "summary.md").string();
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 20)}), {"--summary-md", md}), 1);
  std::ifstream in(md);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("## fusebench gate: FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("| SLOWER |"), std::string::npos) << text;
}

TEST_F(Gate, MissingCounterSaysWhyWhenTheReportDoes) {
  json cur = entry(kA, 10,
                   {{"counters_unavailable",
                     {{"dram_read_bytes", "CUPTI: insufficient privileges (ERR_NVGPUCTRPERM)"}}}});
  cur.erase("dram_read_bytes");
  EXPECT_EQ(run(report({entry(kA, 10)}), report({cur})), 1) << out;
  EXPECT_NE(out.find("unavailable: CUPTI: insufficient privileges (ERR_NVGPUCTRPERM)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("unavailable?"), std::string::npos) << out;
  // No reason in the report: the table says so instead of guessing.
  json bare = entry(kA, 10);
  bare.erase("dram_read_bytes");
  EXPECT_EQ(run(report({entry(kA, 10)}), report({bare})), 1) << out;
  EXPECT_NE(out.find("gives no reason in counters_unavailable"), std::string::npos) << out;
}

// The speedup rule (COMMON contract 2): a fused entry's speedup over split with its interval.
json with_speedup(double s, double low, double high) {
  return entry(kB, 8, {{"speedup", s}, {"speedup_ci_low", low}, {"speedup_ci_high", high}});
}

TEST_F(Gate, SpeedupIntervalWhollyBelowBaselineFails) {
  const auto md = (dir / "summary.md").string();
  const json base = report({entry(kA, 10), with_speedup(1.30, 1.25, 1.35)});
  const json cur = report({entry(kA, 10), with_speedup(1.10, 1.05, 1.15)});
  // Times are equal: only the speedup rule can fail this.
  EXPECT_EQ(run(base, cur, {"--summary-md", md}), 1) << out;
  EXPECT_NE(out.find("LOST"), std::string::npos) << out;
  EXPECT_NE(out.find("[1.050, 1.150] vs baseline [1.250, 1.350]: wholly below"), std::string::npos)
      << out;
  EXPECT_NE(out.find("applied to 1 entry."), std::string::npos) << out;
  EXPECT_NE(out.find("1 regression(s)"), std::string::npos) << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("## fusebench gate: FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("| LOST | `" + kB + "` | speedup | 1.300x | 1.100x |"), std::string::npos)
      << text;
  EXPECT_NE(text.find("Speedup rule: applied to 1 entry."), std::string::npos) << text;
}

TEST_F(Gate, SpeedupIntervalsThatOverlapOrRisePass) {
  const json base = report({with_speedup(1.30, 1.25, 1.35)});
  EXPECT_EQ(run(base, report({with_speedup(1.22, 1.15, 1.26)})), 0) << out;
  EXPECT_NE(out.find("overlap"), std::string::npos) << out;
  // Touching is overlapping: wholly below means current high < baseline low.
  EXPECT_EQ(run(base, report({with_speedup(1.2, 1.15, 1.25)})), 0) << out;
  EXPECT_EQ(run(base, report({with_speedup(1.5, 1.45, 1.55)})), 0) << out;
  EXPECT_NE(out.find("FASTER"), std::string::npos) << out;
  EXPECT_NE(out.find("wholly above"), std::string::npos) << out;
  // --ignore-time gates counters only: no speedup rule, and the summary says so; what it did not
  // judge makes the verdict NOT JUDGED (exit 3), never PASS.
  EXPECT_EQ(run(base, report({with_speedup(1.1, 1.05, 1.15)}), {"--ignore-time"}), 3) << out;
  EXPECT_NE(out.find("not applied: --ignore-time"), std::string::npos) << out;
}

TEST_F(Gate, WithoutIntervalsComparedAsTodayAndSummarySaysWhy) {
  const auto md = (dir / "summary.md").string();
  // A baseline from before intervals were reported, against a current report that has them.
  EXPECT_EQ(run(report({entry(kA, 10), entry(kB, 8)}),
                report({entry(kA, 10), with_speedup(1.1, 1.05, 1.15)}), {"--summary-md", md}),
            0)
      << out;
  EXPECT_NE(out.find("applied to 0 entries; could not apply to 1: baseline has no speedup, "
                     "current has an interval (1, e.g. " +
                     kB + ")"),
            std::string::npos)
      << out;
  std::ifstream in(md);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("could not apply to 1: baseline has no speedup"), std::string::npos) << text;
  // A speedup without its interval.
  EXPECT_EQ(
      run(report({with_speedup(1.3, 1.25, 1.35)}), report({entry(kB, 8, {{"speedup", 1.0}})})), 0)
      << out;
  EXPECT_NE(out.find("current has a speedup without speedup_ci_low/high"), std::string::npos)
      << out;
  // Neither report has any: one sentence, and the time rule still decides.
  EXPECT_EQ(run(report({entry(kA, 10)}), report({entry(kA, 20)})), 1) << out;
  EXPECT_NE(out.find("not applied: no entry of either report has a speedup interval"),
            std::string::npos)
      << out;
}

TEST_F(Gate, MalformedSpeedupIntervalIsUnusableInput) {
  const json good = report({with_speedup(1.3, 1.25, 1.35)});
  json no_high = with_speedup(1.3, 1.25, 1.35);
  no_high.erase("speedup_ci_high");
  struct Case {
    json entry;
    std::string message;
  };
  const std::vector<Case> cases = {
      {with_speedup(1.3, 1.4, 1.2),
       "cur.json: benchmarks[0] (" + kB +
           ").speedup_ci_low: 1.4 is greater than speedup_ci_high 1.2"},
      {entry(kB, 8, {{"speedup", 1.3}, {"speedup_ci_low", 1.2}, {"speedup_ci_high", "1.4"}}),
       "(" + kB + ").speedup_ci_high: expected a number, got \"1.4\""},
      {entry(kB, 8, {{"speedup", nullptr}, {"speedup_ci_low", 1.2}, {"speedup_ci_high", 1.4}}),
       "(" + kB + ").speedup: expected a number, got null"},
      {no_high, "(" + kB + ").speedup_ci_high: missing while speedup_ci_low is present"},
      {with_speedup(1.3, 0, 1.4), "(" + kB + ").speedup_ci_low: 0 is not positive"},
      {with_speedup(-1, 0.5, 1.4), "(" + kB + ").speedup: -1 is not positive"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(run(good, report({c.entry})), 2) << c.entry.dump();
    EXPECT_NE(err.find(c.message), std::string::npos) << err;
    // The baseline is checked the same way, and named.
    EXPECT_EQ(run(report({c.entry}), good), 2) << c.entry.dump();
    EXPECT_NE(err.find("base.json: benchmarks[0]"), std::string::npos) << err;
  }
}

TEST(GateReader, SpeedupFromRepetitionsAndAggregates) {
  // A stddev aggregate of the bounds is no interval: its low may exceed its high.
  auto rep = [](json e, int index) {  // Google Benchmark numbers repetitions
    e["repetition_index"] = index;
    return e;
  };
  auto agg = [](const std::string& name, double low, double high) {
    return json{{"name", kB + "_" + name}, {"run_name", kB},         {"run_type", "aggregate"},
                {"aggregate_name", name},  {"real_time", 8.0},       {"time_unit", "us"},
                {"speedup_ci_low", low},   {"speedup_ci_high", high}};
  };
  const json doc = {{"context", json::object()},
                    {"benchmarks",
                     {rep(with_speedup(1.3, 1.25, 1.35), 0), rep(with_speedup(1.2, 1.1, 1.3), 1),
                      agg("mean", 1.175, 1.325), agg("stddev", 0.1, 0.03)}}};
  const auto r = fusebench::gate::parse_report(doc.dump(), "x.json");
  ASSERT_EQ(r.entries.size(), 1u);
  const fusebench::advise::Ratio* speedup = r.entries[0].speedup_interval();
  ASSERT_TRUE(speedup);
  EXPECT_DOUBLE_EQ(*speedup->low, 1.25);  // the first repetition's, as counters
  EXPECT_DOUBLE_EQ(speedup->speedup, 1.3);
}

// Issue 19: figures without evidence are not judged. A speedup on fewer than 6 pairs (even with
// an older report's [min, max] "interval"), or a contended group's entry, fails nothing and is
// said to be not judged; its counters are still gated.
TEST_F(Gate, FewPairsAreNotJudged) {
  const json base = entry(kA, 10,
                          {{"speedup", 1.6},
                           {"speedup_ci_low", 1.6},
                           {"speedup_ci_high", 1.6},
                           {"speedup_pairs", 1.0},
                           {"samples", 1.0}});
  const json cur = entry(kA, 20,  // twice as slow, and the speedup "lost"
                         {{"speedup", 1.0},
                          {"speedup_ci_low", 0.99},
                          {"speedup_ci_high", 1.01},
                          {"speedup_pairs", 2.0},
                          {"samples", 2.0}});
  EXPECT_EQ(run(report({base}), report({cur})), 3) << out;
  EXPECT_NE(out.find("not judged: n < 6"), std::string::npos) << out;
  EXPECT_NE(out.find("NOT JUDGED (1 entry not judged on time or speedup, e.g. " + kA +
                     " (n < 6 (speedup_pairs 2) (current)))"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("LOST"), std::string::npos) << out;
  EXPECT_EQ(out.find("SLOWER"), std::string::npos) << out;
  EXPECT_NE(out.find("1 benchmark(s) not judged"), std::string::npos) << out;
  // Counters are still compared: a launch count change fails whatever the timing.
  json changed = cur;
  changed["launches"] = 4.0;
  EXPECT_EQ(run(report({base}), report({changed})), 1) << out;
}

TEST_F(Gate, ContendedEntriesAreNotJudged) {
  const json good = entry(kA, 10,
                          {{"speedup", 1.5},
                           {"speedup_ci_low", 1.45},
                           {"speedup_ci_high", 1.55},
                           {"speedup_pairs", 100.0},
                           {"samples", 100.0}});
  json contended = entry(kA, 30,
                         {{"speedup", 1.0},
                          {"speedup_ci_low", 0.98},
                          {"speedup_ci_high", 1.02},
                          {"speedup_pairs", 100.0},
                          {"samples", 100.0},
                          {"samples_dropped_preempted", 40.0}});
  contended["timing_stop"] = "contended";
  EXPECT_EQ(run(report({good}), report({contended})), 3) << out;
  EXPECT_NE(out.find("not judged: contended (current)"), std::string::npos) << out;
  EXPECT_EQ(run(report({contended}), report({good})), 3) << out;
  EXPECT_NE(out.find("not judged: contended (baseline)"), std::string::npos) << out;
  // The same intervals without the contention mark: LOST, exit 1 (the rule itself still bites).
  contended.erase("timing_stop");
  EXPECT_EQ(run(report({good}), report({contended})), 1) << out;
  EXPECT_NE(out.find("LOST"), std::string::npos) << out;
}
