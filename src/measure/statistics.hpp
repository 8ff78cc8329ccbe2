#pragma once
// Sample statistics and the stopping rule of every timing regime, as pure functions so they are
// unit-tested on synthetic samples without a device. The rule follows nvbench: keep sampling
// until the relative standard deviation is under a target after a minimum accumulated time,
// give up at a wall-clock timeout, and discard samples taken while the SM clock was throttled.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace fusebench::measure {

struct Sample {
  double seconds = 0;        // time per run (the sample's total divided by its runs)
  double total_seconds = 0;  // time the sample covered (counts toward the minimum time)
  double sm_clock_mhz = -1;  // mean SM clock over the sample; < 0 when unknown
};

struct StoppingRule {
  double target_cv = 0.005;  // relative standard deviation to reach
  double min_time_s = 0.5;   // measured time to accumulate before convergence may be declared
  double max_time_s = 5.0;   // wall-clock timeout of the whole measurement
  std::size_t min_samples = 5;
  std::size_t max_samples = 100000;  // bounds memory on very short regions
  // Samples whose clock is below this fraction of default_clock_mhz are dropped as throttled.
  double throttle_fraction = 0.75;
  double default_clock_mhz = 0;  // <= 0: unknown, no sample is dropped
};

enum class StopReason { keep_going, converged, timed_out, max_samples };
const char* to_string(StopReason reason);

struct Summary {
  std::size_t samples = 0;            // valid samples the statistics use
  std::size_t dropped_throttled = 0;  // samples discarded for a throttled clock
  double median = 0, mean = 0, min = 0, max = 0, stdev = 0;
  double cv = 0;                         // stdev / mean (sample stdev, n-1); 0 with one sample
  double measured_seconds = 0;           // sum of total_seconds over valid samples
  std::optional<double> clock_mhz_mean;  // over valid samples with a known clock
  std::optional<double> clock_mhz_min;
};

// Statistics of the valid samples (throttled ones counted and left out).
Summary summarize(const std::vector<Sample>& samples, const StoppingRule& rule);
bool is_throttled(const Sample& s, const StoppingRule& rule);

// What to do after the latest sample, given the wall time spent so far on this measurement.
StopReason should_stop(const Summary& summary, std::size_t samples_taken, double wall_elapsed_s,
                       const StoppingRule& rule);

// Collects samples and applies the rule incrementally (summarising every sample would be
// quadratic for fast regions, so the running sums give mean and variance and the median is
// computed once at the end).
class SampleSet {
 public:
  explicit SampleSet(StoppingRule rule) : rule_(rule) {}
  void add(const Sample& s);
  StopReason check(double wall_elapsed_s) const;
  Summary summary() const { return summarize(samples_, rule_); }
  const std::vector<Sample>& samples() const { return samples_; }
  const StoppingRule& rule() const { return rule_; }

 private:
  StoppingRule rule_;
  std::vector<Sample> samples_;
  std::size_t valid_ = 0, throttled_ = 0;
  double sum_ = 0, sum_sq_ = 0, measured_ = 0;
  double shift_ = 0;  // first valid value: sums of (x - shift) keep the variance precise
};

}  // namespace fusebench::measure
