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
    case StopReason::blocks_disagree:
      return "blocks_disagree";
    case StopReason::contended:
      return "contended";
  }
  return "unknown";
}

bool is_throttled(const Sample& s, const StoppingRule& rule) {
  // An unknown clock (or unknown reference) cannot prove throttling: the sample is kept.
  return rule.reference_clock_mhz > 0 && s.sm_clock_mhz >= 0 &&
         s.sm_clock_mhz < rule.throttle_fraction * rule.reference_clock_mhz;
}

bool is_dropped(const Sample& s, const StoppingRule& rule) {
  return s.preempted || is_throttled(s, rule);
}

Summary summarize(const std::vector<Sample>& samples, const StoppingRule& rule) {
  Summary out;
  std::vector<double> values;
  values.reserve(samples.size());
  double clock_sum = 0;
  std::size_t clock_n = 0;
  for (const Sample& s : samples) {
    if (s.waited_s >= 0) {
      out.waited_s += s.waited_s;
      out.waited_over_s += s.total_seconds;
      out.waited_known = true;
    }
    if (s.sm_clock_mhz >= 0) {
      out.all_clock_mhz_min =
          std::min(out.all_clock_mhz_min.value_or(s.sm_clock_mhz), s.sm_clock_mhz);
      out.all_clock_mhz_max =
          std::max(out.all_clock_mhz_max.value_or(s.sm_clock_mhz), s.sm_clock_mhz);
    }
    if (s.preempted) {
      ++out.dropped_preempted;
      continue;
    }
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
      out.clock_mhz_max = std::max(out.clock_mhz_max.value_or(s.sm_clock_mhz), s.sm_clock_mhz);
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

}  // namespace fusebench::measure
