// The statistics and stopping rule of the timing regimes, on synthetic samples.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

TEST(Statistics, ConvergesOnQuietSamples) {
  StoppingRule rule;
  rule.target_cv = 0.005;
  rule.min_time_s = 1e-3;
  rule.min_samples = 5;
  rule.max_time_s = 10;
  SampleSet set(rule);
  std::mt19937 rng(1);
  std::normal_distribution<double> noise(10e-6, 10e-6 * 0.001);  // 0.1% noise
  StopReason r = StopReason::keep_going;
  int n = 0;
  while (r == StopReason::keep_going && n < 100000) {
    set.add(at(noise(rng)));
    r = set.check(/*wall_elapsed_s=*/0.0);
    ++n;
  }
  EXPECT_EQ(r, StopReason::converged);
  // The minimum time (1 ms of 10 us samples) gates convergence, not the CV.
  EXPECT_GE(n, 100);
  EXPECT_LE(n, 110);
  const auto s = set.summary();
  EXPECT_LT(s.cv, 0.005);
  EXPECT_NEAR(s.median, 10e-6, 1e-7);
}

TEST(Statistics, IncrementalCheckAgreesWithSummary) {
  StoppingRule rule;
  rule.min_time_s = 0;
  rule.min_samples = 2;
  rule.target_cv = 0.1;
  SampleSet set(rule);
  set.add(at(1.0));
  set.add(at(1.5));  // cv = 0.354/1.25 = 0.28 > 0.1
  EXPECT_EQ(set.check(0), StopReason::keep_going);
  EXPECT_GT(set.summary().cv, 0.1);
  for (int i = 0; i < 50; ++i) set.add(at(1.25));
  EXPECT_EQ(set.check(0), StopReason::converged);
  EXPECT_LT(set.summary().cv, 0.1);
}

TEST(Statistics, TimesOutOnNoisySamples) {
  StoppingRule rule;
  rule.target_cv = 0.005;
  rule.min_time_s = 0;
  rule.max_time_s = 2.0;
  SampleSet set(rule);
  double wall = 0;
  StopReason r = StopReason::keep_going;
  for (int i = 0; r == StopReason::keep_going; ++i) {
    set.add(at(i % 2 ? 1e-3 : 2e-3));  // 33% CV: never converges
    wall += 0.1;
    r = set.check(wall);
  }
  EXPECT_EQ(r, StopReason::timed_out);
  EXPECT_NEAR(wall, 2.0, 0.11);
  EXPECT_GT(set.summary().cv, 0.3);
}

TEST(Statistics, StopsAtMaxSamples) {
  StoppingRule rule;
  rule.target_cv = 1e-9;
  rule.max_samples = 10;
  SampleSet set(rule);
  StopReason r = StopReason::keep_going;
  for (int i = 0; r == StopReason::keep_going; ++i) {
    set.add(at(1 + i));
    r = set.check(0);
  }
  EXPECT_EQ(r, StopReason::max_samples);
  EXPECT_EQ(set.samples().size(), 10u);
}

TEST(Statistics, DropsThrottledSamples) {
  StoppingRule rule;
  rule.default_clock_mhz = 1980;
  rule.throttle_fraction = 0.75;  // below 1485 MHz is throttled
  const auto s =
      summarize({at(1e-5, 1900), at(9e-5, 1000), at(1.1e-5, 1485), at(1.2e-5, -1)}, rule);
  EXPECT_EQ(s.dropped_throttled, 1u);
  EXPECT_EQ(s.samples, 3u);  // the unknown-clock sample is kept: it cannot be shown throttled
  EXPECT_DOUBLE_EQ(s.max, 1.2e-5);  // the slow throttled sample is gone
  ASSERT_TRUE(s.clock_mhz_mean.has_value());
  EXPECT_DOUBLE_EQ(*s.clock_mhz_mean, (1900 + 1485) / 2.0);
  EXPECT_DOUBLE_EQ(*s.clock_mhz_min, 1485);
}

TEST(Statistics, ThrottledSamplesDoNotCountTowardConvergence) {
  StoppingRule rule;
  rule.default_clock_mhz = 2000;
  rule.min_samples = 5;
  rule.min_time_s = 0;
  SampleSet set(rule);
  for (int i = 0; i < 20; ++i) set.add(at(1e-5, 500));  // all throttled
  EXPECT_EQ(set.check(0), StopReason::keep_going);
  EXPECT_EQ(set.summary().samples, 0u);
  EXPECT_EQ(set.summary().dropped_throttled, 20u);
  EXPECT_EQ(set.check(100), StopReason::timed_out);
}

TEST(Statistics, UnknownDefaultClockDropsNothing) {
  StoppingRule rule;  // default_clock_mhz = 0
  EXPECT_FALSE(is_throttled(at(1, 10), rule));
  EXPECT_EQ(summarize({at(1, 10)}, rule).dropped_throttled, 0u);
}
