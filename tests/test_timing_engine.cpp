// The timing engine: interleaving order, the group stopping rule on synthetic samples
// (converges, times out, max samples, groups without their baseline), the engine on the CPU with
// synthetic regions (order, rotation sets, speedups of every pair; a member that waits for the
// held stream, on a fake device, is retired without costing its group), and on the GPU in every
// regime (skipped without a device). No assertion depends on how fast anything ran.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "fusebench/backend.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/workspace.hpp"
#include "measure/interleave.hpp"
#include "measure/rotation.hpp"
#include "measure/timing_device.hpp"
#include "measure/timing_engine.hpp"

using namespace fusebench;
using namespace fusebench::measure;

namespace {

Sample at(double seconds) { return Sample{seconds, seconds, -1}; }

StoppingRule quick_rule(double target) {
  StoppingRule rule;
  rule.target_ci = target;
  rule.min_time_s = 0;
  rule.min_samples = 5;
  rule.max_time_s = 1.0;
  return rule;
}

}  // namespace

TEST(Interleave, RoundOrderRotatesSoEveryMemberLeadsEqually) {
  EXPECT_EQ(round_order(3, 0), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(round_order(3, 1), (std::vector<std::size_t>{1, 2, 0}));
  EXPECT_EQ(round_order(3, 2), (std::vector<std::size_t>{2, 0, 1}));
  EXPECT_EQ(round_order(3, 3), round_order(3, 0));
  EXPECT_EQ(round_order(2, 1), (std::vector<std::size_t>{1, 0}));  // A B, B A, A B, ...
  std::map<std::size_t, int> first;
  for (std::size_t r = 0; r < 12; ++r) ++first[round_order(4, r).front()];
  for (std::size_t m = 0; m < 4; ++m) EXPECT_EQ(first[m], 3);
}

TEST(Interleave, ConvergesOnQuietPairsWithTheBaseline) {
  GroupSamples g(2, quick_rule(0.01));
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0, 0.01);
  StopReason stop = StopReason::keep_going;
  int rounds = 0;
  while (stop == StopReason::keep_going && rounds < 10000) {
    g.begin_round();
    const double drift = 1 + 0.3 * std::sin(rounds / 5.0);  // drift hits both alike
    g.add(0, at(20e-6 * drift * noise(rng)));               // baseline
    g.add(1, at(10e-6 * drift * noise(rng)));
    stop = decide(assess(g, 0), g, 0.0);
    ++rounds;
  }
  EXPECT_EQ(stop, StopReason::converged);
  EXPECT_GE(rounds, 6);  // no 95% interval below 6 pairs
  EXPECT_LT(rounds, 200);
  const auto e = speedup_estimate(g, 1, 0);
  ASSERT_TRUE(e.has_value());
  EXPECT_LE(e->relative_half_width(), 0.01);
  EXPECT_LE(e->low, 2.0);
  EXPECT_GE(e->high, 2.0);
  EXPECT_TRUE(targets_speedup(g, 0));
  EXPECT_EQ(target_text(true, 0.01), "speedup_ci_half_width <= 0.01");
}

TEST(Interleave, MinimumSamplesAndTimeGateConvergence) {
  StoppingRule rule = quick_rule(0.5);
  rule.min_samples = 20;
  rule.min_time_s = 1e-3;  // 100 samples of 10 us
  GroupSamples g(2, rule);
  int rounds = 0;
  StopReason stop = StopReason::keep_going;
  while (stop == StopReason::keep_going) {
    g.begin_round();
    g.add(0, at(10e-6));
    g.add(1, at(10e-6));
    stop = decide(assess(g, 0), g, 0.0);
    ++rounds;
  }
  EXPECT_EQ(stop, StopReason::converged);
  EXPECT_EQ(rounds, 100);  // the minimum time, not the (trivially met) interval, decided
}

TEST(Interleave, TimesOutOnNoisyPairsAfterTheGroupBudget) {
  GroupSamples g(3, quick_rule(0.001));  // max_time 1 s per member: 3 s for the group
  std::mt19937_64 rng(5);
  std::lognormal_distribution<double> noise(0, 0.5);
  double wall = 0;
  StopReason stop = StopReason::keep_going;
  while (stop == StopReason::keep_going) {
    g.begin_round();
    for (std::size_t m = 0; m < 3; ++m) g.add(m, at(1e-3 * noise(rng)));
    wall += 0.01;
    stop = decide(assess(g, 0), g, wall);
  }
  EXPECT_EQ(stop, StopReason::timed_out);
  EXPECT_NEAR(wall, 3.0, 0.011);  // each member had the budget of one entry
  const Assessment a = assess(g, 0);
  EXPECT_FALSE(a.converged);
  EXPECT_GT(a.widest, 0.001);
  EXPECT_NE(a.widest_member, 0u);  // the baseline itself is not targeted
}

TEST(Interleave, StopsAtMaxSamples) {
  StoppingRule rule = quick_rule(1e-9);
  rule.max_samples = 10;
  GroupSamples g(2, rule);
  StopReason stop = StopReason::keep_going;
  for (int i = 0; stop == StopReason::keep_going; ++i) {
    g.begin_round();
    g.add(0, at(1 + i));
    g.add(1, at(2 + i * 0.5));
    stop = decide(assess(g, 0), g, 0.0);
  }
  EXPECT_EQ(stop, StopReason::max_samples);
  EXPECT_EQ(g.rounds(), 10u);
}

TEST(Interleave, WithoutTheBaselineEachMedianIsTargeted) {
  GroupSamples g(2, quick_rule(0.01));
  EXPECT_FALSE(targets_speedup(g, std::nullopt));
  EXPECT_EQ(target_text(false, 0.03), "time_median_ci_half_width <= 0.03");
  // Member 0 is quiet, member 1 noisy: the group waits for member 1's median.
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> noisy(0, 0.2);
  for (int r = 0; r < 50; ++r) {
    g.begin_round();
    g.add(0, at(1e-5));
    g.add(1, at(1e-5 * noisy(rng)));
  }
  const Assessment a = assess(g, std::nullopt);
  EXPECT_FALSE(a.converged);
  EXPECT_EQ(a.widest_member, 1u);
  // A group of one (the baseline alone) targets its median too.
  GroupSamples one(1, quick_rule(0.01));
  EXPECT_FALSE(targets_speedup(one, 0));
  for (int r = 0; r < 10; ++r) {
    one.begin_round();
    one.add(0, at(1e-5));
  }
  EXPECT_TRUE(assess(one, 0).converged);
}

TEST(Interleave, ThrottledAndMissingSamplesPairWithNothing) {
  StoppingRule rule = quick_rule(0.01);
  rule.reference_clock_mhz = 2000;
  GroupSamples g(2, rule);
  g.begin_round();
  g.add(0, Sample{1e-5, 1e-5, 1900});
  g.add(1, Sample{2e-5, 2e-5, 900});  // throttled: counted as dropped, no value
  g.begin_round();
  g.add(0, std::nullopt);  // e.g. the blocking kernel timed out
  g.add(1, Sample{2e-5, 2e-5, 1900});
  g.begin_round();
  g.add(0, Sample{1e-5, 1e-5, 1900});
  g.add(1, Sample{2e-5, 2e-5, 1900});
  EXPECT_EQ(g.valid(0), 2u);
  EXPECT_EQ(g.valid(1), 2u);
  EXPECT_EQ(g.summary(1).dropped_throttled, 1u);
  const auto e = speedup_estimate(g, 1, 0);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->n, 1u);  // only round 3 has both
  EXPECT_FALSE(e->reaches_confidence);
  EXPECT_FALSE(assess(g, 0).converged);
}

TEST(Interleave, RetiredMembersDoNotHoldTheGroup) {
  GroupSamples g(3, quick_rule(0.05));
  for (int r = 0; r < 20; ++r) {
    g.begin_round();
    g.add(0, at(2e-5));
    g.add(1, at(1e-5));
    if (r == 0) g.retire(2);  // e.g. never enqueued behind the blocking kernel: no samples
  }
  EXPECT_TRUE(targets_speedup(g, 0));
  EXPECT_TRUE(assess(g, 0).converged);  // member 2 has no sample and does not block it
  // Without its baseline the group targets the medians of the members left.
  g.retire(0);
  EXPECT_FALSE(targets_speedup(g, 0));
  EXPECT_TRUE(assess(g, 0).converged);
  g.retire(1);
  EXPECT_FALSE(assess(g, 0).converged);  // nothing left is not convergence
}

namespace {

// A region that does a fixed amount of host work (its speed is never asserted).
void spin(int iterations) {
  volatile double x = 1;
  for (int i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
}

}  // namespace

TEST(TimingEngine, CpuGroupIsSampledInRotatedRoundsOnEveryRotationSet) {
  auto backend = make_cpu_backend();
  std::vector<std::vector<std::size_t>> sets_run(3);
  std::vector<TimedMember> members(3);
  for (std::size_t m = 0; m < 3; ++m) {
    members[m].label = "v" + std::to_string(m);
    members[m].sets = m + 1;  // 1, 2 and 3 rotation sets
    members[m].run_set = [m, &sets_run](std::size_t set) {
      sets_run[m].push_back(set);
      spin(2000 * static_cast<int>(m + 1));
    };
  }
  EngineSettings st;
  st.rule = quick_rule(1e-9);  // never converges: stops at max_samples
  st.rule.max_samples = 12;
  st.rule.max_time_s = 60;
  std::vector<std::pair<std::size_t, std::size_t>> order;
  st.on_sample = [&order](std::size_t m, std::size_t r) { order.emplace_back(m, r); };
  const GroupMeasurement g = measure_group(Regime::eager, *backend, members, 0, st);
  EXPECT_EQ(g.stop, StopReason::max_samples);
  EXPECT_EQ(g.rounds, 12u);
  ASSERT_EQ(order.size(), 36u);
  for (std::size_t r = 0; r < 12; ++r) {
    const auto expected = round_order(3, r);
    for (std::size_t j = 0; j < 3; ++j) {
      EXPECT_EQ(order[r * 3 + j].first, expected[j]) << "round " << r;
      EXPECT_EQ(order[r * 3 + j].second, r);
    }
  }
  for (std::size_t m = 0; m < 3; ++m) {
    // The warm-up ran every set once, in order, before any sample; then the sets cycle.
    ASSERT_GE(sets_run[m].size(), members[m].sets);
    for (std::size_t s = 0; s < members[m].sets; ++s) EXPECT_EQ(sets_run[m][s], s);
    std::set<std::size_t> seen(sets_run[m].begin(), sets_run[m].end());
    EXPECT_EQ(seen.size(), members[m].sets);
    EXPECT_EQ(g.members[m].summary.samples, 12u);
    ASSERT_TRUE(g.members[m].median.has_value());
    EXPECT_LE(g.members[m].median->low, g.members[m].median->value);
    EXPECT_GE(g.members[m].median->high, g.members[m].median->value);
  }
  // Every ordered pair has a speedup; m over j and j over m are reciprocal interval ends (the
  // order-statistic ranks are symmetric).
  for (std::size_t m = 0; m < 3; ++m) {
    EXPECT_FALSE(g.speedup[m][m].has_value());
    for (std::size_t j = 0; j < 3; ++j) {
      if (j == m) continue;
      ASSERT_TRUE(g.speedup[m][j].has_value());
      EXPECT_EQ(g.speedup[m][j]->n, 12u);
      EXPECT_NEAR(g.speedup[m][j]->low * g.speedup[j][m]->high, 1.0, 1e-12);
    }
  }
  EXPECT_TRUE(g.targets_speedup);
  EXPECT_EQ(g.target, "speedup_ci_half_width <= 1e-09");
}

// Members whose one-run estimates differ eightfold still take the same R, so each of their
// samples holds the same number of runs (sized apart, R 2 vs 3 moved a CPU ratio by 7%).
TEST(TimingEngine, EveryMemberOfAGroupTakesTheSameRunsPerSample) {
  auto backend = make_cpu_backend();
  std::vector<TimedMember> members(2);
  std::vector<std::size_t> calls(2, 0);
  const double seconds[2] = {400e-6, 50e-6};
  for (std::size_t m = 0; m < 2; ++m) {
    members[m].label = "v" + std::to_string(m);
    members[m].run_set = [m, &calls, &seconds](std::size_t) {
      ++calls[m];
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds[m]));
    };
  }
  EngineSettings st;
  st.rule = quick_rule(1e-9);  // never converges: stops at max_samples
  st.rule.max_samples = 8;
  st.rule.max_time_s = 60;
  st.target_sample_s = 2e-3;
  const GroupMeasurement g = measure_group(Regime::eager, *backend, members, 0, st);
  const std::int64_t r = g.members[0].runs_per_sample;
  EXPECT_GE(r, 1);
  EXPECT_EQ(g.members[1].runs_per_sample, r);
  for (std::size_t m = 0; m < 2; ++m) {
    // The warm-up (one set), the estimate, then R runs per sample.
    EXPECT_EQ(calls[m], 2 + static_cast<std::size_t>(r) * g.members[m].summary.samples) << m;
  }
}

TEST(TimingEngine, CpuGroupStopsAtTheScaledTimeout) {
  auto backend = make_cpu_backend();
  std::vector<TimedMember> members(2);
  for (auto& m : members) m.run_set = [](std::size_t) { spin(1000); };
  EngineSettings st;
  st.rule = quick_rule(1e-12);  // unreachable
  st.rule.max_time_s = 0.05;
  const GroupMeasurement g = measure_group(Regime::eager, *backend, members, 0, st);
  EXPECT_EQ(g.stop, StopReason::timed_out);
  EXPECT_GE(g.wall_seconds, 0.1);  // 2 members x 0.05 s
}

TEST(TimingEngine, GpuRegimesNeedADevice) {
  auto backend = make_cpu_backend();
  std::vector<TimedMember> members(1);
  members[0].run_set = [](std::size_t) {};
  EngineSettings st;
  for (Regime r : {Regime::cold, Regime::batch, Regime::graph}) {
    try {
      measure_group(r, *backend, members, std::nullopt, st);
      FAIL() << to_string(r);
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("needs a GPU"), std::string::npos);
    }
  }
}

namespace {

// A DeviceTiming for the CPU backend: block() only marks the stream held. A region that "waits
// for the held stream" (what a library's synchronous copy does behind a real blocking kernel)
// waits out the timeout on the host and then finds the block timed out, as on a GPU.
class FakeHoldDevice : public DeviceTiming {
 public:
  void block(double timeout_s) override {
    holding_ = true;
    timed_out_ = false;
    timeout_s_ = timeout_s;
    runs_in_hold_ = 0;
  }
  void release() override { holding_ = false; }
  bool block_timed_out() override { return timed_out_; }
  void probe_clock() override {}
  double probed_clock_mhz() override { return 1800; }
  double default_clock_mhz() const override { return 1980; }
  std::unique_ptr<GraphReplay> capture(const std::function<void()>&) override { return nullptr; }
  double copy_bandwidth(std::size_t, int) override { return 1; }

  // Called from a region: waits for the held stream when `from_run` runs in this hold (1: the
  // first) have been enqueued.
  void wait_for_stream_after(int from_run) {
    if (!holding_ || ++runs_in_hold_ < from_run) return;
    std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s_));
    timed_out_ = true;
    holding_ = false;
  }

 private:
  bool holding_ = false;
  bool timed_out_ = false;
  double timeout_s_ = 0;
  int runs_in_hold_ = 0;
};

// split, fused, grouped; grouped's region waits for the held stream from its `from_run`-th run in
// a hold on.
std::vector<TimedMember> members_with_a_waiting_one(FakeHoldDevice& dev, int from_run) {
  std::vector<TimedMember> members(3);
  const char* names[3] = {"split", "fused", "grouped"};
  for (int i = 0; i < 3; ++i) {
    members[i].label = names[i];
    members[i].launches_per_run = i == 0 ? 3 : 1;
    members[i].run_set = [&dev, i, from_run](std::size_t) {
      spin(i == 0 ? 3000 : 2000);
      if (i == 2) dev.wait_for_stream_after(from_run);
    };
  }
  return members;
}

EngineSettings held_settings(FakeHoldDevice& dev) {
  EngineSettings st;
  st.device = &dev;
  st.rule = quick_rule(0.5);
  st.rule.max_time_s = 0.3;  // the device check's budget: 0.9 s for the group of 3
  st.rule.reference_clock_mhz = 1980;
  return st;
}

}  // namespace

// A member whose every held run waits for the stream (cost: one block timeout per sample) is
// retired by the warm-up's hold probe, before round 0, so the group's budget goes to the others.
// Before the probe, its 8-10 timeouts used the whole budget: 2 rounds, no 95% interval.
TEST(TimingEngine, MemberWaitingForTheHeldStreamIsRetiredBeforeTheRounds) {
  auto backend = make_cpu_backend();
  for (Regime regime : {Regime::batch, Regime::cold}) {
    FakeHoldDevice dev;
    std::vector<TimedMember> members = members_with_a_waiting_one(dev, 1);
    EngineSettings st = held_settings(dev);
    std::size_t grouped_samples = 0;
    st.on_sample = [&grouped_samples](std::size_t m, std::size_t) { grouped_samples += m == 2; };
    const GroupMeasurement g = measure_group(regime, *backend, members, 0, st);
    const char* r = to_string(regime);
    EXPECT_EQ(grouped_samples, 0u) << r;
    EXPECT_TRUE(g.members[2].gave_up) << r;
    EXPECT_EQ(g.members[2].block_timeouts, 1u) << r;  // the probe's, nothing in the rounds
    EXPECT_EQ(g.members[2].summary.samples, 0u) << r;
    EXPECT_NE(g.members[2].gave_up_reason.find("hold probe"), std::string::npos)
        << r << ": " << g.members[2].gave_up_reason;
    EXPECT_FALSE(g.members[0].gave_up) << r;
    EXPECT_FALSE(g.members[1].gave_up) << r;
    EXPECT_TRUE(g.members[1].gave_up_reason.empty()) << r;
    const auto& fused = g.speedup[1][0];
    ASSERT_TRUE(fused.has_value()) << r;
    EXPECT_GE(fused->n, 6u) << r;
    EXPECT_TRUE(fused->reaches_confidence) << r;
    EXPECT_FALSE(g.speedup[2][0].has_value()) << r;
    EXPECT_TRUE(g.targets_speedup) << r;  // split is still there: fused's speedup is targeted
  }
}

// A region that waits for the held stream only between runs (its 2nd run in one hold) passes the
// probe; its first batch of R > 1 runs times out, and the next samples take one run each at once
// (a queue of at most 128 launches never fills, so halving R would only cost more timeouts).
TEST(TimingEngine, TimeoutBetweenRunsGoesStraightToOneRunPerSample) {
  auto backend = make_cpu_backend();
  FakeHoldDevice dev;
  std::vector<TimedMember> members = members_with_a_waiting_one(dev, 2);
  EngineSettings st = held_settings(dev);
  st.block_timeout_s = 0.05;
  st.target_sample_s = 10;  // R = the cap behind the block, however fast
  const GroupMeasurement g = measure_group(Regime::batch, *backend, members, 0, st);
  EXPECT_FALSE(g.members[2].gave_up);
  EXPECT_EQ(g.members[2].block_timeouts, 1u);
  EXPECT_EQ(g.members[2].runs_per_sample, 1);
  EXPECT_GT(g.members[2].summary.samples, 0u);
  // The group's common R: the smallest cap, split's (3 launches per run).
  EXPECT_EQ(g.members[1].runs_per_sample, max_runs_behind_block(3));
  EXPECT_EQ(g.members[0].runs_per_sample, max_runs_behind_block(3));
  EXPECT_EQ(g.members[1].block_timeouts, 0u);
}

namespace {

class NoopGraph : public GraphReplay {
 public:
  void launch() override {}
};

// Graph capture as cudaStreamEndCapture sees it: a region that breaks the capture without an
// error of its own (a library's synchronous copy) fails at the end of the capture, outside it.
class FakeCaptureDevice : public FakeHoldDevice {
 public:
  std::unique_ptr<GraphReplay> capture(const std::function<void()>& region) override {
    capturing = true;
    broken = false;
    region();
    capturing = false;
    if (broken) throw std::runtime_error("cudaStreamEndCapture: capture invalidated");
    return std::make_unique<NoopGraph>();
  }
  bool capturing = false;
  bool broken = false;
};

}  // namespace

// A failure of one member (its warm-up, its graph capture, a later sample) is thrown as that
// member's MemberFailure, so the caller can measure the group again without it.
TEST(TimingEngine, AMembersFailureNamesTheMember) {
  auto backend = make_cpu_backend();
  FakeCaptureDevice dev;
  enum class Fails { in_warm_up, in_sample, at_end_of_capture };
  for (Fails when : {Fails::in_warm_up, Fails::in_sample, Fails::at_end_of_capture}) {
    std::vector<TimedMember> members(3);
    int runs_of_1 = 0;
    for (std::size_t m = 0; m < 3; ++m) {
      members[m].run_set = [&, m](std::size_t) {
        spin(1000);
        if (m != 1) return;
        ++runs_of_1;
        if (when == Fails::in_warm_up) throw std::runtime_error("region of v1 failed");
        if (when == Fails::in_sample && runs_of_1 > 2) throw std::runtime_error("late failure");
        if (when == Fails::at_end_of_capture && dev.capturing) dev.broken = true;
      };
    }
    EngineSettings st;
    st.device = &dev;
    st.rule = quick_rule(1e-9);
    st.rule.max_samples = 50;
    const Regime regime = when == Fails::at_end_of_capture ? Regime::graph : Regime::eager;
    try {
      measure_group(regime, *backend, members, 0, st);
      FAIL() << "no failure, case " << static_cast<int>(when);
    } catch (const MemberFailure& e) {
      EXPECT_EQ(e.member, 1u) << static_cast<int>(when);
      EXPECT_NE(std::string(e.what()).find(when == Fails::at_end_of_capture ? "EndCapture"
                                           : when == Fails::in_warm_up      ? "region of v1"
                                                                            : "late failure"),
                std::string::npos)
          << e.what();
    }
  }
}

// On a GPU: split and fused qkv measured interleaved in each of the four regimes give a speedup
// with an interval that contains it, from paired rounds, with the clock read per sample.
TEST(TimingEngineGpu, InterleavedGroupsGiveSpeedupsWithIntervalsInEveryRegime) {
  std::string why;
  auto backend = make_cuda_backend(&why);
  if (!backend) GTEST_SKIP() << "needs a CUDA device: " << why;
  auto dev = make_device_timing(*backend, &why);
  ASSERT_TRUE(dev) << why;
  const ShardShape s = shard(find_model("llama3-8b"), 1);
  Workspace split(*backend, build_plan("qkv", "split", s, 16, DType::bf16), 3);
  Workspace fused(*backend, build_plan("qkv", "fused", s, 16, DType::bf16), 3);
  RotationSets split_sets(split, rotation_sets(split.bytes(), 50u << 20, 1u << 30));
  RotationSets fused_sets(fused, rotation_sets(fused.bytes(), 50u << 20, 1u << 30));
  for (Regime regime : {Regime::cold, Regime::batch, Regime::eager, Regime::graph}) {
    std::vector<std::unique_ptr<GraphReplay>> split_graphs, fused_graphs;
    std::vector<TimedMember> members(2);
    members[0].label = "split";
    members[0].sets = split_sets.sets();
    members[0].run_set = [&](std::size_t i) { split_sets.run(i, [&] { split.run(); }); };
    members[0].launches_per_run = 3;
    members[0].graphs = &split_graphs;
    members[1].label = "fused";
    members[1].sets = fused_sets.sets();
    members[1].run_set = [&](std::size_t i) { fused_sets.run(i, [&] { fused.run(); }); };
    members[1].graphs = &fused_graphs;
    EngineSettings st;
    st.device = dev.get();
    st.rule.target_ci = 0.01;
    st.rule.min_time_s = 0.01;
    st.rule.max_time_s = 0.3;
    st.rule.reference_clock_mhz = dev->default_clock_mhz();
    const GroupMeasurement g = measure_group(regime, *backend, members, 0, st);
    const auto& e = g.speedup[1][0];
    ASSERT_TRUE(e.has_value()) << to_string(regime);
    EXPECT_GE(e->n, 6u) << to_string(regime);
    EXPECT_TRUE(e->reaches_confidence) << to_string(regime);
    EXPECT_GT(e->low, 0) << to_string(regime);
    EXPECT_LE(e->low, e->value) << to_string(regime);
    EXPECT_GE(e->high, e->value) << to_string(regime);
    EXPECT_TRUE(g.members[1].summary.clock_mhz_mean.has_value()) << to_string(regime);
    if (regime == Regime::graph) {
      EXPECT_EQ(split_graphs.size(), split_sets.sets());
      EXPECT_EQ(fused_graphs.size(), fused_sets.sets());
    }
    std::cerr << to_string(regime) << ": fused over split " << e->value << " [" << e->low << ", "
              << e->high << "], " << e->n << " pairs, stop " << to_string(g.stop) << "\n";
  }
}
