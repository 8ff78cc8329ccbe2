#include "measure/intervals.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fusebench::measure {

MedianRanks median_ci_ranks(std::size_t n, double confidence) {
  MedianRanks r;
  if (n == 0) return r;
  const double tail = (1 - confidence) / 2;
  // P(B <= k) for B ~ Binomial(n, 1/2), summed upward with the pmf kept in log space (the first
  // terms underflow for large n; their sum is what matters and it stays exact enough).
  double log_pmf = -static_cast<double>(n) * std::log(2.0);
  double cdf = 0;
  std::size_t lower = 0;  // largest l with P(B <= l - 1) <= tail
  for (std::size_t k = 0; 2 * k + 1 <= n; ++k) {
    const double pmf = std::exp(log_pmf);
    if (cdf + pmf > tail) break;
    cdf += pmf;
    lower = k + 1;
    log_pmf += std::log(static_cast<double>(n - k)) - std::log(static_cast<double>(k + 1));
  }
  if (lower == 0) {
    // Even [min, max] misses the confidence: give it with its true coverage 1 - 2^(1-n).
    r.lower = 1;
    r.upper = n;
    r.coverage = std::max(0.0, 1 - 2 * std::exp(-static_cast<double>(n) * std::log(2.0)));
    return r;
  }
  r.lower = lower;
  r.upper = n + 1 - lower;
  r.coverage = 1 - 2 * cdf;
  r.reaches_confidence = true;
  return r;
}

double Estimate::relative_half_width() const {
  if (!(value > 0)) return std::numeric_limits<double>::infinity();
  return (high - low) / 2 / value;
}

Estimate median_with_ci(std::vector<double> values, double confidence) {
  if (values.empty()) throw std::invalid_argument("median_with_ci: no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  Estimate e;
  e.n = n;
  e.value = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  const MedianRanks r = median_ci_ranks(n, confidence);
  e.low = values[r.lower - 1];
  e.high = values[r.upper - 1];
  e.coverage = r.coverage;
  e.reaches_confidence = r.reaches_confidence;
  return e;
}

std::optional<Estimate> paired_speedup(const std::vector<std::optional<double>>& reference,
                                       const std::vector<std::optional<double>>& member,
                                       double confidence) {
  // On log ratios, so m over j is exactly the reciprocal of j over m even for an even count
  // (the middle two averaged geometrically); the interval ends are the same order statistics.
  std::vector<double> log_ratios;
  const std::size_t rounds = std::min(reference.size(), member.size());
  log_ratios.reserve(rounds);
  for (std::size_t r = 0; r < rounds; ++r) {
    if (reference[r] && member[r] && *member[r] > 0 && *reference[r] > 0)
      log_ratios.push_back(std::log(*reference[r] / *member[r]));
  }
  if (log_ratios.empty()) return std::nullopt;
  Estimate e = median_with_ci(std::move(log_ratios), confidence);
  e.value = std::exp(e.value);
  e.low = std::exp(e.low);
  e.high = std::exp(e.high);
  return e;
}

std::string interval_method_text(double confidence) {
  const int pct = static_cast<int>(std::lround(confidence * 100));
  return "distribution-free order-statistic interval of the median at " + std::to_string(pct) +
         "%: of n sorted values, [x_(l), x_(n+1-l)] with the largest l such that "
         "1 - 2*P(Binomial(n, 1/2) <= l-1) >= " +
         std::to_string(pct) +
         "% (exact coverage for independent values of any continuous distribution). speedup: the "
         "values are the per-round paired ratios baseline time / this variant's time (both "
         "samples taken in the same round of the interleaved measurement); time_median: this "
         "entry's own samples. Under 6 values no interval reaches " +
         std::to_string(pct) +
         "%: the entry then has no *_ci_low/high at all, only its value, and says why "
         "(speedup_ci_note, time_median_ci_note); charts, summaries and the gate judge nothing "
         "from it";
}

}  // namespace fusebench::measure
