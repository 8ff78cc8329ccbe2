// Measurement in blocks (measure/blocks.hpp): the t quantile, the between-block interval, the
// combination of blocks (pooled value, hull interval, stop reason) on synthetic blocks with
// known answers, its coverage when blocks really differ, and the engine measuring in blocks.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "fusebench/backend.hpp"
#include "measure/blocks.hpp"

using namespace fusebench;
using namespace fusebench::measure;

namespace {

StoppingRule rule_with_target(double target) {
  StoppingRule r;
  r.target_ci = target;
  r.min_time_s = 0;
  return r;
}

// A block of two members (0: the baseline) from per-round times, its estimates computed as
// measure_group computes them.
GroupMeasurement block_of(const std::vector<double>& base, const std::vector<double>& variant,
                          StopReason stop = StopReason::converged) {
  GroupMeasurement g;
  g.baseline = 0;
  g.targets_speedup = true;
  g.stop = stop;
  g.rounds = base.size();
  g.wall_seconds = 1;
  g.members.resize(2);
  const std::vector<double>* times[2] = {&base, &variant};
  for (std::size_t m = 0; m < 2; ++m) {
    for (double t : *times[m]) {
      g.members[m].round_values.push_back(t);
      g.members[m].samples.push_back(Sample{t, t, -1});
    }
    g.members[m].median = median_with_ci(*times[m]);
  }
  g.speedup.assign(2, std::vector<std::optional<Estimate>>(2));
  g.speedup[1][0] = paired_speedup(g.members[0].round_values, g.members[1].round_values);
  g.speedup[0][1] = paired_speedup(g.members[1].round_values, g.members[0].round_values);
  return g;
}

// Rounds of a variant `ratio` times faster than a baseline of 1 ms, with paired noise.
GroupMeasurement block_at(double ratio, std::size_t rounds, double noise, std::mt19937_64& rng,
                          StopReason stop = StopReason::converged) {
  std::normal_distribution<double> n(0, noise);
  std::vector<double> base, variant;
  for (std::size_t r = 0; r < rounds; ++r) {
    const double t = 1e-3 * std::exp(n(rng));
    base.push_back(t);
    variant.push_back(t / ratio * std::exp(n(rng)));
  }
  return block_of(base, variant, stop);
}

}  // namespace

TEST(Blocks, StudentTQuantilesMatchTheTables) {
  // Two-sided 95% (p = 0.975) critical values of Student's t.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706, 2e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.303, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.776, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.228, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.975, 1000), 1.962, 1e-3);
  EXPECT_NEAR(student_t_quantile(0.995, 4), 4.604, 1e-3);
  EXPECT_DOUBLE_EQ(student_t_quantile(0.5, 3), 0);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.776, 1e-3);
  EXPECT_THROW(student_t_quantile(1.0, 4), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(0.975, 0), std::invalid_argument);
}

TEST(Blocks, BetweenBlockIntervalIsTheTIntervalOfTheLogMean) {
  // log values -0.1, 0, 0.1: mean 0, sd 0.1, t(2) = 4.303, half-width 4.303 * 0.1 / sqrt(3).
  const auto e = between_blocks_interval({std::exp(-0.1), 1.0, std::exp(0.1)});
  ASSERT_TRUE(e.has_value());
  const double half = 4.3027 * 0.1 / std::sqrt(3.0);
  EXPECT_NEAR(e->value, 1.0, 1e-12);
  EXPECT_NEAR(std::log(e->low), -half, 1e-3);
  EXPECT_NEAR(std::log(e->high), half, 1e-3);
  EXPECT_EQ(e->n, 3u);
  EXPECT_TRUE(e->reaches_confidence);
  // Equal blocks: no spread, a point.
  const auto same = between_blocks_interval({1.1, 1.1, 1.1});
  ASSERT_TRUE(same.has_value());
  EXPECT_NEAR(same->low, 1.1, 1e-12);
  EXPECT_NEAR(same->high, 1.1, 1e-12);
  // Under two blocks, or a value that is not positive: no interval.
  EXPECT_FALSE(between_blocks_interval({1.0}).has_value());
  EXPECT_FALSE(between_blocks_interval({1.0, 0.0}).has_value());
}

TEST(Blocks, BlockRuleSplitsTheTimeBudget) {
  StoppingRule r = rule_with_target(0.03);
  r.min_time_s = 0.02;
  r.max_time_s = 0.5;
  r.min_samples = 5;
  const StoppingRule b = block_rule(r, 5);
  EXPECT_DOUBLE_EQ(b.min_time_s, 0.004);
  EXPECT_DOUBLE_EQ(b.max_time_s, 0.1);
  EXPECT_EQ(b.min_samples, 5u);
  EXPECT_DOUBLE_EQ(b.target_ci, 0.03);
}

TEST(Blocks, BlocksAreSizedToTheBudget) {
  std::string note;
  // Rounds of 10 ms in a 2 s budget: 66 blocks of 3 rounds would fit, 5 are asked.
  EXPECT_EQ(blocks_that_fit(5, 0.01, 2.0, &note), 5u);
  EXPECT_TRUE(note.empty());
  // Rounds of 0.2 s: 3 blocks of 3 rounds fit.
  EXPECT_EQ(blocks_that_fit(5, 0.2, 2.0, &note), 3u);
  EXPECT_TRUE(note.empty());
  // Rounds of 0.4 s: only one block fits twice; measured as one block, and said so.
  EXPECT_EQ(blocks_that_fit(5, 0.4, 2.0, &note), 1u);
  EXPECT_NE(note.find("5 blocks asked, but a round takes 0.4 s"), std::string::npos) << note;
  EXPECT_NE(note.find("raise --timing-max-time"), std::string::npos) << note;
  EXPECT_EQ(blocks_that_fit(1, 0.4, 2.0, nullptr), 1u);
  // The block rule keeps a block going past its share of the time until it has 3 rounds.
  EXPECT_EQ(block_rule(rule_with_target(0.03), 3).timeout_min_rounds, kMinRoundsPerBlock);
  GroupSamples g(2, block_rule(rule_with_target(1e-9), 3));
  for (int r = 0; r < 2; ++r) {
    g.begin_round();
    g.add(0, Sample{1e-3, 1e-3, -1});
    g.add(1, Sample{2e-3, 2e-3, -1});
  }
  const Assessment a = assess(g, 0);
  EXPECT_EQ(decide(a, g, 1e9), StopReason::keep_going);  // 2 rounds: far past time, not done
  g.begin_round();
  g.add(0, Sample{1e-3, 1e-3, -1});
  g.add(1, Sample{2e-3, 2e-3, -1});
  EXPECT_EQ(decide(assess(g, 0), g, 1e9), StopReason::timed_out);
}

TEST(Blocks, CombinedValueIsThePooledMedianAndTheIntervalTheHull) {
  std::mt19937_64 rng(3);
  std::vector<GroupMeasurement> blocks;
  for (double ratio : {1.00, 1.20, 1.10}) blocks.push_back(block_at(ratio, 40, 0.01, rng));
  const GroupMeasurement g = combine_blocks(blocks, rule_with_target(0.03));
  EXPECT_EQ(g.blocks, 3u);
  EXPECT_EQ(g.rounds, 120u);
  EXPECT_DOUBLE_EQ(g.wall_seconds, 3);
  ASSERT_EQ(g.members[1].round_values.size(), 120u);
  EXPECT_EQ(g.members[0].summary.samples, 120u);
  // The value: the median of the 120 pooled ratios.
  const auto pooled = paired_speedup(g.members[0].round_values, g.members[1].round_values);
  const auto& e = g.speedup[1][0];
  ASSERT_TRUE(e.has_value() && pooled.has_value());
  EXPECT_DOUBLE_EQ(e->value, pooled->value);
  EXPECT_EQ(e->n, 120u);
  // Per block values recorded; the interval holds the between-block one and the pooled one.
  const BlockSpread& s = g.speedup_blocks[1][0];
  ASSERT_EQ(s.values.size(), 3u);
  ASSERT_TRUE(blocks[1].speedup[1][0].has_value());
  EXPECT_DOUBLE_EQ(s.values[1], blocks[1].speedup[1][0]->value);
  ASSERT_TRUE(s.between.has_value());
  EXPECT_LE(e->low, std::min(s.between->low, pooled->low));
  EXPECT_GE(e->high, std::max(s.between->high, pooled->high));
  EXPECT_DOUBLE_EQ(e->low, std::min(s.between->low, pooled->low));
  // Blocks 20% apart: far wider than the pooled interval, which alone would claim +-2%.
  EXPECT_GT(e->relative_half_width(), 0.1);
  EXPECT_LT(pooled->relative_half_width(), 0.05);
  // Every block converged, but the combined interval misses the 3% target.
  EXPECT_EQ(g.stop, StopReason::blocks_disagree);
  EXPECT_EQ(g.target, "speedup_ci_half_width <= 0.03");
  // The medians are combined the same way.
  ASSERT_EQ(g.median_blocks[1].values.size(), 3u);
  ASSERT_TRUE(g.members[1].median.has_value());
  EXPECT_LE(g.members[1].median->low, g.median_blocks[1].between->low);
}

TEST(Blocks, AgreeingBlocksConvergeAndKeepThePooledInterval) {
  std::mt19937_64 rng(5);
  std::vector<GroupMeasurement> blocks;
  for (int b = 0; b < 5; ++b) blocks.push_back(block_at(1.3, 60, 0.02, rng));
  const GroupMeasurement g = combine_blocks(blocks, rule_with_target(0.03));
  EXPECT_EQ(g.stop, StopReason::converged);
  ASSERT_TRUE(g.speedup[1][0].has_value());
  EXPECT_NEAR(g.speedup[1][0]->value, 1.3, 0.02);
  EXPECT_LE(g.widest, 0.03);
}

TEST(Blocks, StopSaysWhyTheCombinedIntervalIsWide) {
  std::mt19937_64 rng(7);
  // A block that ran out of its time: timed_out, not blocks_disagree.
  std::vector<GroupMeasurement> blocks = {block_at(1.0, 40, 0.01, rng),
                                          block_at(1.3, 8, 0.01, rng, StopReason::timed_out)};
  EXPECT_EQ(combine_blocks(blocks, rule_with_target(0.03)).stop, StopReason::timed_out);
  blocks[1].stop = StopReason::max_samples;
  EXPECT_EQ(combine_blocks(blocks, rule_with_target(0.03)).stop, StopReason::max_samples);
  // A loose target the combined interval meets: converged, whatever a block did.
  EXPECT_EQ(combine_blocks(blocks, rule_with_target(10)).stop, StopReason::converged);
}

TEST(Blocks, BlocksOfDifferentGroupsAreRefused) {
  std::mt19937_64 rng(9);
  std::vector<GroupMeasurement> blocks = {block_at(1.0, 10, 0.01, rng),
                                          block_at(1.0, 10, 0.01, rng)};
  blocks[1].members.resize(3);
  EXPECT_THROW(combine_blocks(blocks, rule_with_target(0.03)), std::invalid_argument);
  EXPECT_THROW(combine_blocks({}, rule_with_target(0.03)), std::invalid_argument);
}

// Blocks shifted by a random state of the machine (log-normal, sd 5%) with little noise within
// each: the pooled interval alone misses the true ratio most of the time, the combined one
// covers it at about its 95%.
TEST(Blocks, CombinedIntervalCoversWhenBlocksReallyDiffer) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> block_effect(0, 0.05);
  const double truth = 1.1;
  int covered = 0, pooled_covered = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    std::vector<GroupMeasurement> blocks;
    for (int b = 0; b < 5; ++b)
      blocks.push_back(block_at(truth * std::exp(block_effect(rng)), 30, 0.01, rng));
    const GroupMeasurement g = combine_blocks(blocks, rule_with_target(0.03));
    const auto& e = *g.speedup[1][0];
    if (e.low <= truth && truth <= e.high) ++covered;
    const auto p = *paired_speedup(g.members[0].round_values, g.members[1].round_values);
    if (p.low <= truth && truth <= p.high) ++pooled_covered;
  }
  EXPECT_GE(covered, trials * 93 / 100);
  EXPECT_LT(pooled_covered, trials / 2);
}

TEST(Blocks, EngineMeasuresTheGroupBlockByBlock) {
  auto backend = make_cpu_backend();
  std::vector<TimedMember> members(2);
  std::vector<std::size_t> calls(2, 0);
  for (std::size_t m = 0; m < 2; ++m) {
    members[m].label = "v" + std::to_string(m);
    members[m].run_set = [m, &calls](std::size_t) {
      ++calls[m];
      volatile double x = 1;
      for (int i = 0; i < 3000 * static_cast<int>(m + 1); ++i) x = x * 1.0000001 + 1e-9;
    };
  }
  EngineSettings st;
  st.rule = rule_with_target(1e-9);  // never converges: every block stops at max_samples
  st.rule.max_samples = 10;
  st.rule.max_time_s = 60;
  std::size_t rounds_seen = 0;
  st.on_sample = [&rounds_seen](std::size_t member, std::size_t) {
    if (member == 0) ++rounds_seen;
  };
  std::vector<std::size_t> rounds_at_refresh;
  std::vector<std::string> after;  // "block/blocks:rounds" as each block ends (a progress line)
  const auto after_block = [&](std::size_t b, std::size_t blocks, const GroupMeasurement& m) {
    after.push_back(std::to_string(b) + "/" + std::to_string(blocks) + ":" +
                    std::to_string(m.rounds));
  };
  const GroupMeasurement g = measure_in_blocks(
      Regime::eager, *backend, members, 0, st, 3, [&] { rounds_at_refresh.push_back(rounds_seen); },
      after_block);
  // Called between blocks only: after the first and the second.
  EXPECT_EQ(rounds_at_refresh, (std::vector<std::size_t>{10, 20}));
  EXPECT_EQ(after, (std::vector<std::string>{"0/3:10", "1/3:10", "2/3:10"}));
  EXPECT_EQ(g.blocks, 3u);
  EXPECT_EQ(g.rounds, 30u);  // 10 rounds per block: max_samples holds per block
  EXPECT_EQ(rounds_seen, 30u);
  EXPECT_EQ(g.stop, StopReason::max_samples);
  ASSERT_EQ(g.speedup_blocks[0][1].values.size(), 3u);
  ASSERT_TRUE(g.speedup[0][1].has_value());
  EXPECT_EQ(g.speedup[0][1]->n, 30u);
  EXPECT_EQ(g.members[1].summary.samples, 30u);
  // One block is exactly measure_group.
  after.clear();
  const GroupMeasurement one =
      measure_in_blocks(Regime::eager, *backend, members, 0, st, 1, {}, after_block);
  EXPECT_EQ(after, (std::vector<std::string>{"0/1:10"}));  // told of its one block too
  EXPECT_EQ(one.blocks, 1u);
  EXPECT_EQ(one.rounds, 10u);
  EXPECT_TRUE(one.speedup_blocks.empty());
}

TEST(Blocks, EngineMeasuresAGroupTooSlowForBlocksAsOneAndSaysSo) {
  auto backend = make_cpu_backend();
  std::vector<TimedMember> members(2);
  for (auto& m : members)
    m.run_set = [](std::size_t) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  EngineSettings st;
  st.rule = rule_with_target(1e-9);
  st.rule.max_time_s = 0.05;  // a 0.1 s budget for rounds of 40 ms: no 3 blocks of 3 rounds
  int refreshes = 0;
  const GroupMeasurement g =
      measure_in_blocks(Regime::eager, *backend, members, 0, st, 5, [&] { ++refreshes; });
  EXPECT_EQ(refreshes, 0);
  EXPECT_EQ(g.blocks, 1u);
  EXPECT_EQ(g.blocks_asked, 5u);
  EXPECT_NE(g.blocks_note.find("measured as one block"), std::string::npos) << g.blocks_note;
  EXPECT_EQ(g.stop, StopReason::timed_out);
}
