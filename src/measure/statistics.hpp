#pragma once
// Sample statistics and the stopping rule's parameters, as pure functions so they are
// unit-tested on synthetic samples without a device. Samples taken while the SM clock was
// throttled are discarded (as nvbench does); when to stop a measurement is decided over a whole
// comparison group (interleave.hpp), on the confidence interval of what the group reports.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace fusebench::measure {

struct Sample {
  double seconds = 0;        // time per run (the sample's total divided by its runs)
  double total_seconds = 0;  // time the sample covered (counts toward the minimum time)
  double sm_clock_mhz = -1;  // SM clock over the sample; < 0 when unknown
  // Host-timed samples: seconds our threads waited for a CPU during the sample (run delay,
  // contention.hpp); < 0 when not read. `preempted`: more than kPreemptedFraction of the
  // sample, so it is dropped (kept for the counts, pairs with nothing).
  double waited_s = -1;
  bool preempted = false;
};

struct StoppingRule {
  // Relative half-width of the targeted interval to reach: the speedup's interval for the
  // non-baseline members of a group with its baseline, else each member's median interval.
  double target_ci = 0.01;
  double confidence = 0.95;
  double min_time_s = 0.5;      // measured time each member accumulates before stopping may happen
  double max_time_s = 5.0;      // wall-clock budget per member: a group of k has k times this
  std::size_t min_samples = 5;  // valid samples each member needs
  std::size_t max_samples = 100000;  // rounds (samples per member): bounds memory on tiny regions
  // Samples whose clock is below this fraction of reference_clock_mhz are dropped as throttled.
  double throttle_fraction = 0.75;
  // The clock under load (measured with the ceilings), else the default clock; <= 0: unknown,
  // no sample is dropped.
  double reference_clock_mhz = 0;
  // The timeout does not end a measurement before this many rounds (a block of a measurement in
  // blocks needs a few values for its own estimate; blocks.hpp sizes the blocks to fit).
  std::size_t timeout_min_rounds = 0;
};

// blocks_disagree: every block of a measurement in blocks (blocks.hpp) converged, but their
// spread widened the combined interval past the target.
// contended: preempted samples (contention.hpp) kept the group from a valid interval, or busy
// neighbours took CPU time while a group whose own threads outnumber the cores was measured.
enum class StopReason { keep_going, converged, timed_out, max_samples, blocks_disagree, contended };
const char* to_string(StopReason reason);

struct Summary {
  std::size_t samples = 0;            // valid samples the statistics use
  std::size_t dropped_throttled = 0;  // samples discarded for a throttled clock
  std::size_t dropped_preempted = 0;  // samples discarded: our threads waited for a CPU
  double waited_s = 0;                // run delay summed over every sample that read it
  double waited_over_s = 0;           // those samples' own seconds (total_seconds)
  bool waited_known = false;          // some sample read its run delay
  double median = 0, mean = 0, min = 0, max = 0, stdev = 0;
  double cv = 0;                         // stdev / mean (sample stdev, n-1); 0 with one sample
  double measured_seconds = 0;           // sum of total_seconds over valid samples
  std::optional<double> clock_mhz_mean;  // over valid samples with a known clock
  std::optional<double> clock_mhz_min;
  std::optional<double> clock_mhz_max;
  // Over every sample with a known clock, throttled ones included: whether the light-load clock
  // of small regions is what the throttle rule dropped.
  std::optional<double> all_clock_mhz_min;
  std::optional<double> all_clock_mhz_max;
};

// Statistics of the valid samples (throttled ones counted and left out).
Summary summarize(const std::vector<Sample>& samples, const StoppingRule& rule);
bool is_throttled(const Sample& s, const StoppingRule& rule);
// Throttled or preempted: kept for the counts, left out of the statistics and the pairing.
bool is_dropped(const Sample& s, const StoppingRule& rule);

}  // namespace fusebench::measure
