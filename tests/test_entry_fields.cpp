// An entry's fields from a synthetic measurement (src/runner/entry_fields.hpp): what the report
// says of the time, the interval, contention and the comparison, without running anything.
#include <gtest/gtest.h>

#include "fusebench/cost_model.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/shapes.hpp"
#include "runner/entry_fields.hpp"
#include "runner/step_profile.hpp"

namespace fb = fusebench;
namespace m = fusebench::measure;

namespace {

m::Estimate estimate(double value, std::size_t n, bool confident) {
  m::Estimate e;
  e.value = value;
  e.low = value * 0.9;
  e.high = value * 1.1;
  e.n = n;
  e.reaches_confidence = confident;
  return e;
}

// Two members (split, fused) measured eagerly over `n` rounds; fused twice as fast.
m::GroupMeasurement two_members(std::size_t n, bool confident) {
  m::GroupMeasurement g;
  g.regime = m::Regime::eager;
  g.stop = m::StopReason::converged;
  g.rounds = n;
  g.target = "speedup";
  g.contention_watched = true;
  g.preemption_checked = true;
  for (double t : {2e-3, 1e-3}) {
    m::MemberMeasurement mm;
    mm.summary.samples = n;
    mm.summary.median = t;
    mm.summary.mean = t;
    mm.summary.min = t;
    mm.median = estimate(t, n, confident);
    g.members.push_back(mm);
  }
  g.speedup = {{std::nullopt, estimate(0.5, n, confident)},
               {estimate(2.0, n, confident), std::nullopt}};
  g.baseline = 0;
  return g;
}

const fb::bench::Comparison kCmp{{"split", "fused"}, "fused", "split", "unused"};

}  // namespace

TEST(EntryFields, ConfidentIntervalsAreReportedWithTheMedianAndSpeedup) {
  const m::GroupMeasurement g = two_members(20, true);
  const m::StoppingRule rule;
  const m::Summary s = fb::bench::entry_summary(g, 1, rule);
  fb::bench::EntryResult r = fb::bench::timing_entry(g, 1, s, rule, 3, "rotate");
  fb::bench::add_comparison(g, 1, kCmp, r);
  ASSERT_TRUE(r.error.empty());
  EXPECT_DOUBLE_EQ(r.seconds, 1e-3);
  EXPECT_DOUBLE_EQ(r.counters.at("time_median_ci_low"), 0.9e-3);
  EXPECT_DOUBLE_EQ(r.counters.at("speedup"), 2.0);
  EXPECT_DOUBLE_EQ(r.counters.at("speedup_ci_high"), 2.2);
  EXPECT_DOUBLE_EQ(r.counters.at("rotation_sets"), 3);
  EXPECT_EQ(r.fields.at("cache_policy"), "rotate");
  EXPECT_EQ(r.fields.at("timing_stop"), "converged");
  EXPECT_EQ(r.fields.at("interleaved_with"), (std::vector<std::string>{"split", "fused"}));
  EXPECT_DOUBLE_EQ(r.fields.at("speedup_over").at("split").at("speedup").get<double>(), 2.0);
}

TEST(EntryFields, TooFewValuesGiveNoIntervalButANote) {
  const m::GroupMeasurement g = two_members(3, false);
  const m::StoppingRule rule;
  fb::bench::EntryResult r =
      fb::bench::timing_entry(g, 1, fb::bench::entry_summary(g, 1, rule), rule, 1, "rotate");
  fb::bench::add_comparison(g, 1, kCmp, r);
  EXPECT_EQ(r.counters.count("time_median_ci_low"), 0u);
  EXPECT_EQ(r.counters.count("speedup_ci_low"), 0u);
  EXPECT_NE(r.fields.at("speedup_ci_note").get<std::string>().find("only 3 pairs"),
            std::string::npos);
  EXPECT_FALSE(r.fields.at("speedup_over").at("split").contains("ci_low"));
}

TEST(EntryFields, BaselineEntryHasNoSpeedupAndAMissingBaselineSaysWhy) {
  m::GroupMeasurement g = two_members(20, true);
  const m::StoppingRule rule;
  fb::bench::EntryResult base =
      fb::bench::timing_entry(g, 0, fb::bench::entry_summary(g, 0, rule), rule, 1, "rotate");
  fb::bench::add_comparison(g, 0, {{"split", "fused"}, "split", "split", ""}, base);
  EXPECT_EQ(base.counters.count("speedup"), 0u);
  EXPECT_EQ(base.fields.count("speedup_unavailable"), 0u);

  g.baseline.reset();
  fb::bench::EntryResult r =
      fb::bench::timing_entry(g, 1, fb::bench::entry_summary(g, 1, rule), rule, 1, "rotate");
  fb::bench::add_comparison(g, 1, {{"fused"}, "fused", "split", "the baseline (split) failed: x"},
                            r);
  EXPECT_EQ(r.fields.at("speedup_unavailable"), "the baseline (split) failed: x: no speedup");
  EXPECT_EQ(r.counters.count("speedup"), 0u);
}

TEST(EntryFields, NoValidSampleIsAnErrorNamingWhatWasDropped) {
  m::GroupMeasurement g = two_members(20, true);
  g.members[1].summary = {};
  g.members[1].summary.dropped_throttled = 4;
  g.members[1].block_timeouts = 2;
  const m::StoppingRule rule;
  const fb::bench::EntryResult r =
      fb::bench::timing_entry(g, 1, fb::bench::entry_summary(g, 1, rule), rule, 1, "rotate");
  EXPECT_NE(r.error.find("4 throttled"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("2 blocking-kernel timeouts"), std::string::npos) << r.error;
}

TEST(EntryFields, EverySamplePreemptedInAContendedGroupIsReportedAsContendedNotAnError) {
  m::GroupMeasurement g = two_members(20, true);
  g.stop = m::StopReason::contended;
  m::MemberMeasurement& mm = g.members[1];
  mm.summary = {};
  mm.summary.dropped_preempted = 5;
  for (int i = 0; i < 5; ++i) mm.samples.push_back({3e-3, 3e-3, -1, 1e-3, true});
  const m::StoppingRule rule;
  const m::Summary s = fb::bench::entry_summary(g, 1, rule);
  EXPECT_EQ(s.samples, 5u);
  const fb::bench::EntryResult r = fb::bench::timing_entry(g, 1, s, rule, 1, "rotate");
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_DOUBLE_EQ(r.seconds, 3e-3);
  EXPECT_DOUBLE_EQ(r.counters.at("samples"), 0);
  EXPECT_DOUBLE_EQ(r.counters.at("contended"), 1);
  EXPECT_TRUE(r.fields.contains("time_median_note"));
  EXPECT_TRUE(r.fields.contains("timing_contended_note"));
}

TEST(EntryFields, ClocksAndModelCost) {
  fb::bench::EntryResult r;
  m::Summary s;
  fb::bench::add_clocks(s, false, r);
  EXPECT_NE(r.fields.at("sm_clock_unavailable").get<std::string>().find("no GPU"),
            std::string::npos);
  s.clock_mhz_mean = s.clock_mhz_min = s.clock_mhz_max = 1980;
  fb::bench::EntryResult gpu;
  fb::bench::add_clocks(s, true, gpu);
  EXPECT_DOUBLE_EQ(gpu.counters.at("sm_clock_mhz"), 1980);
  EXPECT_FALSE(gpu.fields.contains("sm_clock_unavailable"));

  fb::Cost cost;
  cost.flops = 8;
  cost.bytes = 4;
  cost.launches = 3;
  fb::bench::add_model_cost(cost, 16, 2, r);
  EXPECT_DOUBLE_EQ(r.counters.at("model_intensity"), 2);
  EXPECT_DOUBLE_EQ(r.counters.at("tokens"), 16);
  EXPECT_DOUBLE_EQ(r.counters.at("tp"), 2);
}

// The step profile (runner/step_profile.hpp) of gate_up's split plan: two GEMMs and the
// activation, their shares of the steps' sum, the activation's bytes against the copy ceiling.
TEST(StepProfile, SharesByKindNonGemmShareAndCopyFraction) {
  const fb::Plan plan = fb::build_plan(
      "gate_up", "split", fb::shard(fb::find_model("qwen3-0.6b"), 1), 64, fb::DType::bf16);
  const std::vector<fb::StepCostEntry> costs = fb::step_costs(plan);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[0].kind, "gemm");
  EXPECT_EQ(costs[2].kind, "activation");
  fb::bench::EntryResult r;
  // GEMMs 3 ms each, the activation 4 ms: glue dominates.
  fb::bench::add_step_profile(plan, {3e-3, 3e-3, 4e-3}, 10e9, 0.02, r);
  const auto& p = r.fields.at("step_profile");
  ASSERT_EQ(p.at("kinds").size(), 2u);
  EXPECT_EQ(p.at("kinds")[0].at("kind"), "gemm");
  EXPECT_EQ(p.at("kinds")[0].at("steps"), 2);
  EXPECT_DOUBLE_EQ(p.at("kinds")[0].at("share").get<double>(), 0.6);
  EXPECT_EQ(p.at("dominant"), "gemm");
  EXPECT_DOUBLE_EQ(r.counters.at("non_gemm_share"), 0.4);
  EXPECT_DOUBLE_EQ(p.at("sum_of_entry_time").get<double>(), 0.5);
  const auto& act = p.at("kinds")[1];
  EXPECT_DOUBLE_EQ(act.at("of_copy_bandwidth").get<double>(),
                   costs[2].bytes / 4e-3 / 10e9);                // 3 M N bytes over its time
  EXPECT_FALSE(p.at("kinds")[0].contains("of_copy_bandwidth"));  // a GEMM is judged by FLOPs
  // No time at all (a plan whose steps were not timed): no profile rather than a share of 0/0.
  fb::bench::EntryResult none;
  fb::bench::add_step_profile(plan, {0, 0, 0}, 10e9, 0.02, none);
  EXPECT_FALSE(none.fields.contains("step_profile"));
}
