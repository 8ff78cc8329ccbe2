#pragma once
// Confidence intervals of a median that assume no distribution: the order-statistic interval.
// For n independent values from any continuous distribution, the number B of values below the
// true median is Binomial(n, 1/2), so [X_(l), X_(n+1-l)] (the l-th smallest and the l-th
// largest) covers the median with probability exactly 1 - 2 P(B <= l - 1). We take the largest
// l whose coverage is still at least the confidence asked (95%). It needs no bootstrap (no
// random numbers: the same samples always give the same interval) and no normality, and timing
// samples are skewed (long right tails), which is why the median is reported in the first place.
// Below 6 values no pair of ranks reaches 95% (1 - 2^(1-n) < 0.95): the estimate is flagged
// (reaches_confidence false, low/high hold [min, max] for the arithmetic only) and no report,
// chart or gate shows or judges an interval from it.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace fusebench::measure {

struct MedianRanks {
  std::size_t lower = 0, upper = 0;  // 1-based ranks into the sorted values (0: no values)
  double coverage = 0;               // exact P(X_(lower) <= median <= X_(upper))
  bool reaches_confidence = false;   // false: too few values, [min, max] with lower coverage
};
// The ranks of the order-statistic interval of the median of n values at `confidence`.
MedianRanks median_ci_ranks(std::size_t n, double confidence = 0.95);

struct Estimate {
  double value = 0;  // the median
  double low = 0, high = 0;
  std::size_t n = 0;  // values it rests on
  double coverage = 0;
  bool reaches_confidence = false;
  // (high - low) / 2 / value: what the stopping rule compares with its target. Infinite when
  // the value is not positive.
  double relative_half_width() const;
};
// Median of `values` and its order-statistic interval. Throws std::invalid_argument when empty.
Estimate median_with_ci(std::vector<double> values, double confidence = 0.95);

// Paired speedup of `member` over `reference`: per round r where both have a value, the ratio
// reference[r] / member[r] (> 1: member faster); the median of those ratios with its interval
// (of an even count, the geometric mean of the middle two, so that the speedup of m over j is
// exactly the reciprocal of j over m).
// Rounds are the pairing: both values of a ratio were taken within one round, so a drift of the
// machine between rounds (clocks, temperature, other tenants) cancels in the ratio. nullopt when
// no round has both.
std::optional<Estimate> paired_speedup(const std::vector<std::optional<double>>& reference,
                                       const std::vector<std::optional<double>>& member,
                                       double confidence = 0.95);

// How the intervals are computed, in words (the report's context.timing.interval_method).
std::string interval_method_text(double confidence = 0.95);

}  // namespace fusebench::measure
