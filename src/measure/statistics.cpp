#include "measure/statistics.hpp"

#include <algorithm>
#include <cmath>

namespace fusebench::measure {

const char* to_string(StopReason reason) {
  switch (reason) {
    case StopReason::keep_going:
      return "running";
    case StopReason::converged:
      return "converged";
    case StopReason::timed_out:
      return "timed_out";
    case StopReason::max_samples:
      return "max_samples";
  }
  return "unknown";
}

bool is_throttled(const Sample& s, const StoppingRule& rule) {
  // An unknown clock (or unknown default) cannot prove throttling: the sample is kept.
  return rule.default_clock_mhz > 0 && s.sm_clock_mhz >= 0 &&
         s.sm_clock_mhz < rule.throttle_fraction * rule.default_clock_mhz;
}

Summary summarize(const std::vector<Sample>& samples, const StoppingRule& rule) {
  Summary out;
  std::vector<double> values;
  values.reserve(samples.size());
  double clock_sum = 0;
  std::size_t clock_n = 0;
  for (const Sample& s : samples) {
    if (is_throttled(s, rule)) {
      ++out.dropped_throttled;
      continue;
    }
    values.push_back(s.seconds);
    out.measured_seconds += s.total_seconds;
    if (s.sm_clock_mhz >= 0) {
      clock_sum += s.sm_clock_mhz;
      ++clock_n;
      out.clock_mhz_min = std::min(out.clock_mhz_min.value_or(s.sm_clock_mhz), s.sm_clock_mhz);
    }
  }
  if (clock_n > 0) out.clock_mhz_mean = clock_sum / static_cast<double>(clock_n);
  out.samples = values.size();
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  out.min = values.front();
  out.max = values.back();
  out.median = n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  double sum = 0;
  for (double v : values) sum += v;
  out.mean = sum / static_cast<double>(n);
  if (n > 1) {
    double sq = 0;
    for (double v : values) sq += (v - out.mean) * (v - out.mean);
    out.stdev = std::sqrt(sq / static_cast<double>(n - 1));
  }
  out.cv = out.mean > 0 ? out.stdev / out.mean : 0;
  return out;
}

StopReason should_stop(const Summary& s, std::size_t samples_taken, double wall_elapsed_s,
                       const StoppingRule& rule) {
  if (s.samples >= rule.min_samples && s.measured_seconds >= rule.min_time_s &&
      s.cv <= rule.target_cv) {
    return StopReason::converged;
  }
  if (samples_taken >= rule.max_samples) return StopReason::max_samples;
  if (wall_elapsed_s >= rule.max_time_s) return StopReason::timed_out;
  return StopReason::keep_going;
}

void SampleSet::add(const Sample& s) {
  samples_.push_back(s);
  if (is_throttled(s, rule_)) {
    ++throttled_;
    return;
  }
  if (valid_ == 0) shift_ = s.seconds;
  ++valid_;
  const double d = s.seconds - shift_;
  sum_ += d;
  sum_sq_ += d * d;
  measured_ += s.total_seconds;
}

StopReason SampleSet::check(double wall_elapsed_s) const {
  Summary s;
  s.samples = valid_;
  s.dropped_throttled = throttled_;
  s.measured_seconds = measured_;
  if (valid_ > 0) {
    const double n = static_cast<double>(valid_);
    s.mean = shift_ + sum_ / n;
    if (valid_ > 1) {
      const double var = std::max(0.0, (sum_sq_ - sum_ * sum_ / n) / (n - 1));
      s.stdev = std::sqrt(var);
    }
    s.cv = s.mean > 0 ? s.stdev / s.mean : 0;
  }
  return should_stop(s, samples_.size(), wall_elapsed_s, rule_);
}

}  // namespace fusebench::measure
