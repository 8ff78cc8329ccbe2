// The statistics of the timing regimes and the confidence intervals of medians and speedups,
// on synthetic samples with known answers.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "measure/intervals.hpp"
#include "measure/statistics.hpp"

using namespace fusebench::measure;

namespace {

Sample at(double seconds, double clock = -1) { return Sample{seconds, seconds, clock}; }

}  // namespace

TEST(Statistics, SummaryOfKnownSamples) {
  StoppingRule rule;
  const auto s = summarize({at(4), at(1), at(3), at(2)}, rule);
  EXPECT_EQ(s.samples, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_NEAR(s.stdev, std::sqrt(5.0 / 3.0), 1e-12);  // sample stdev (n - 1)
  EXPECT_NEAR(s.cv, std::sqrt(5.0 / 3.0) / 2.5, 1e-12);
  EXPECT_DOUBLE_EQ(s.measured_seconds, 10);
  EXPECT_FALSE(s.clock_mhz_mean.has_value());  // no clock known: absent, not zero
  EXPECT_DOUBLE_EQ(summarize({at(3), at(1), at(2)}, rule).median, 2);
}

TEST(Statistics, DropsThrottledSamples) {
  StoppingRule rule;
  rule.reference_clock_mhz = 1980;
  rule.throttle_fraction = 0.75;  // below 1485 MHz is throttled
  const auto s =
      summarize({at(1e-5, 1900), at(9e-5, 1000), at(1.1e-5, 1485), at(1.2e-5, -1)}, rule);
  EXPECT_EQ(s.dropped_throttled, 1u);
  EXPECT_EQ(s.samples, 3u);  // the unknown-clock sample is kept: it cannot be shown throttled
  EXPECT_DOUBLE_EQ(s.max, 1.2e-5);  // the slow throttled sample is gone
  ASSERT_TRUE(s.clock_mhz_mean.has_value());
  EXPECT_DOUBLE_EQ(*s.clock_mhz_mean, (1900 + 1485) / 2.0);
  EXPECT_DOUBLE_EQ(*s.clock_mhz_min, 1485);
  EXPECT_DOUBLE_EQ(*s.clock_mhz_max, 1900);  // the spread of the kept samples' clocks
  ASSERT_TRUE(s.all_clock_mhz_min.has_value());
  EXPECT_DOUBLE_EQ(*s.all_clock_mhz_min, 1000);  // the throttled one counts here
  EXPECT_DOUBLE_EQ(*s.all_clock_mhz_max, 1900);
  EXPECT_FALSE(summarize({at(1, -1)}, rule).all_clock_mhz_min.has_value());  // absent, not 0
}

// The rule's reference is the clock under load (measured with the ceilings): a sustained GEMM at
// the power cap running at 1500 MHz on a 1980 MHz part is not throttled against a 1500 MHz
// reference, and a sample at 1000 MHz is.
TEST(Statistics, ThrottleRuleUsesTheReferenceClock) {
  StoppingRule rule;
  rule.throttle_fraction = 0.75;
  rule.reference_clock_mhz = 1980;
  EXPECT_TRUE(is_throttled(at(1e-5, 1450), rule));  // the old rule: peak clock reference
  rule.reference_clock_mhz = 1500;                  // measured under load
  EXPECT_FALSE(is_throttled(at(1e-5, 1450), rule));
  EXPECT_TRUE(is_throttled(at(1e-5, 1000), rule));
}

TEST(Statistics, UnknownReferenceClockDropsNothing) {
  StoppingRule rule;  // reference_clock_mhz = 0
  EXPECT_FALSE(is_throttled(at(1, 10), rule));
  EXPECT_EQ(summarize({at(1, 10)}, rule).dropped_throttled, 0u);
}

// Exact ranks of the order-statistic interval (Binomial(n, 1/2) tails; tables of the sign test).
TEST(Intervals, ExactRanksForSmallAndLargeN) {
  struct Row {
    std::size_t n, lower, upper;
    double coverage;
  };
  for (const Row& r :
       {Row{6, 1, 6, 1 - 2.0 / 64}, Row{8, 1, 8, 1 - 2.0 / 256}, Row{9, 2, 8, 1 - 2 * 10.0 / 512},
        Row{10, 2, 9, 1 - 2 * 11.0 / 1024}, Row{20, 6, 15, 0.958610}, Row{100, 40, 61, 0.964800}}) {
    const MedianRanks m = median_ci_ranks(r.n, 0.95);
    EXPECT_TRUE(m.reaches_confidence) << r.n;
    EXPECT_EQ(m.lower, r.lower) << r.n;
    EXPECT_EQ(m.upper, r.upper) << r.n;
    EXPECT_NEAR(m.coverage, r.coverage, 1e-6) << r.n;
    EXPECT_GE(m.coverage, 0.95) << r.n;
  }
  // Wider with more confidence, narrower with more values.
  EXPECT_LT(median_ci_ranks(100, 0.99).lower, 40u);
  EXPECT_GT(median_ci_ranks(1000, 0.95).lower, 400u);
}

TEST(Intervals, FewValuesFallBackToTheWidestIntervalAndSaySo) {
  for (std::size_t n = 1; n <= 5; ++n) {
    const MedianRanks m = median_ci_ranks(n, 0.95);
    EXPECT_FALSE(m.reaches_confidence) << n;
    EXPECT_EQ(m.lower, 1u);
    EXPECT_EQ(m.upper, n);
    EXPECT_NEAR(m.coverage, 1 - 2 * std::pow(0.5, static_cast<double>(n)), 1e-12);
    EXPECT_LT(m.coverage, 0.95);
  }
  const Estimate e = median_with_ci({3, 1, 2}, 0.95);
  EXPECT_DOUBLE_EQ(e.value, 2);
  EXPECT_DOUBLE_EQ(e.low, 1);
  EXPECT_DOUBLE_EQ(e.high, 3);
  EXPECT_FALSE(e.reaches_confidence);
  EXPECT_EQ(median_ci_ranks(0).upper, 0u);
  EXPECT_THROW(median_with_ci({}), std::invalid_argument);
}

TEST(Intervals, MedianIntervalOfKnownValues) {
  std::vector<double> v;
  for (int i = 20; i >= 1; --i) v.push_back(i);  // 1..20, unsorted
  const Estimate e = median_with_ci(v, 0.95);
  EXPECT_DOUBLE_EQ(e.value, 10.5);
  EXPECT_DOUBLE_EQ(e.low, 6);  // ranks 6 and 15 for n = 20
  EXPECT_DOUBLE_EQ(e.high, 15);
  EXPECT_EQ(e.n, 20u);
  EXPECT_NEAR(e.relative_half_width(), (15 - 6) / 2.0 / 10.5, 1e-12);
}

// Coverage on synthetic skewed samples: the interval of the median of 30 lognormal values
// contains the true median (exp(mu)) in about 95.7% of trials (its exact coverage for n = 30).
TEST(Intervals, CoverageOnLognormalSamples) {
  std::mt19937_64 rng(20240611);
  std::lognormal_distribution<double> dist(std::log(10e-6), 0.4);
  const double truth = 10e-6;
  int covered = 0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> v(30);
    for (auto& x : v) x = dist(rng);
    const Estimate e = median_with_ci(v, 0.95);
    covered += e.low <= truth && truth <= e.high;
  }
  const double coverage = static_cast<double>(covered) / trials;
  EXPECT_NEAR(coverage, median_ci_ranks(30).coverage, 0.015);  // 4000 trials: SE ~0.003
  EXPECT_GE(coverage, 0.94);
}

// Paired ratios cancel drift: two variants whose times drift together by a factor of 2 over the
// measurement (clocks, other tenants) keep their true ratio, 1.25, with a narrow interval that
// covers it, while the ratio of their unpaired medians interval would span the drift.
TEST(Intervals, PairedSpeedupCancelsDrift) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0, 0.02);
  int covered = 0;
  const int trials = 500;
  double width = 0, unpaired_width = 0;
  for (int t = 0; t < trials; ++t) {
    std::vector<std::optional<double>> base, member;
    std::vector<double> base_values, member_values;
    for (int r = 0; r < 40; ++r) {
      const double drift = 1 + r / 40.0;  // the machine slows down by 2x
      base.push_back(10e-6 * drift * noise(rng));
      member.push_back(8e-6 * drift * noise(rng));
      base_values.push_back(*base.back());
      member_values.push_back(*member.back());
    }
    const auto e = paired_speedup(base, member);
    ASSERT_TRUE(e.has_value());
    EXPECT_TRUE(e->reaches_confidence);
    EXPECT_EQ(e->n, 40u);
    covered += e->low <= 1.25 && 1.25 <= e->high;
    width += e->relative_half_width();
    // Unpaired: the ratio of the two medians' intervals' ends.
    const Estimate b = median_with_ci(base_values), m = median_with_ci(member_values);
    unpaired_width += (b.high / m.low - b.low / m.high) / 2 / (b.value / m.value);
  }
  EXPECT_GE(static_cast<double>(covered) / trials, 0.93);
  EXPECT_LT(width / trials, 0.02);                         // the drift (2x) does not widen it
  EXPECT_GT(unpaired_width / trials, 5 * width / trials);  // but it widens unpaired medians
}

TEST(Intervals, PairedSpeedupUsesOnlyRoundsWithBothValues) {
  const std::vector<std::optional<double>> base = {2.0, std::nullopt, 4.0, 3.0};
  const std::vector<std::optional<double>> member = {1.0, 1.0, std::nullopt, 1.5};
  const auto e = paired_speedup(base, member);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->n, 2u);              // rounds 0 and 3
  EXPECT_DOUBLE_EQ(e->value, 2.0);  // ratios 2 and 2
  EXPECT_FALSE(paired_speedup({std::nullopt}, {1.0}).has_value());
}

TEST(Intervals, PairedSpeedupsOfTheTwoDirectionsAreReciprocal) {
  // Four rounds, ratios 1, 2, 3 and 4: an even count, the middle two averaged geometrically.
  const std::vector<std::optional<double>> ref = {1.0, 2.0, 3.0, 4.0},
                                           member = {1.0, 1.0, 1.0, 1.0};
  const auto up = paired_speedup(ref, member);
  const auto down = paired_speedup(member, ref);
  ASSERT_TRUE(up && down);
  EXPECT_NEAR(up->value, std::sqrt(6.0), 1e-12);
  EXPECT_NEAR(up->value * down->value, 1, 1e-12);
  EXPECT_NEAR(up->low * down->high, 1, 1e-12);
  EXPECT_NEAR(up->high * down->low, 1, 1e-12);
}
