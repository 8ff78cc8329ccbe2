#pragma once
// Interleaved measurement of a comparison group (the variants of one op at one shape, dtype and
// regime), as pure data and decisions so it is unit-tested on synthetic samples:
//   - samples are taken in rounds, one sample of each member per round, the order within a round
//     rotated (round r starts with member r mod k), so no member is always first or always
//     follows the same one into a round;
//   - member m's speedup over member j is the median over rounds of time_j / time_m, both taken
//     in the same round, with the order-statistic interval (intervals.hpp);
//   - the group stops when, after every member has its minimum samples and measured time, the
//     targeted intervals are narrow enough (the speedup interval of every non-baseline member
//     when the baseline is in the group, else every member's median interval), or at the
//     timeout (the per-entry budget times the group size), or at max_samples rounds.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "measure/intervals.hpp"
#include "measure/statistics.hpp"

namespace fusebench::measure {

// Member index at each position of round `round` (a rotation of 0..members-1).
std::vector<std::size_t> round_order(std::size_t members, std::size_t round);

class GroupSamples {
 public:
  GroupSamples(std::size_t members, StoppingRule rule);
  void begin_round();
  // Member m's sample of the current round; nullopt: it has none (e.g. the blocking kernel timed
  // out). A throttled sample is kept for the statistics of drops but pairs with nothing.
  void add(std::size_t member, const std::optional<Sample>& sample);
  // Member m is no longer sampled (e.g. even one run cannot be enqueued behind the blocking
  // kernel): the stopping rule then leaves it out, so it does not hold its group to the timeout.
  void retire(std::size_t member) { retired_.at(member) = true; }
  bool retired(std::size_t member) const { return retired_.at(member); }

  std::size_t members() const { return values_.size(); }
  std::size_t rounds() const { return rounds_; }
  // Per round: member m's time per run when its sample of that round is valid.
  const std::vector<std::optional<double>>& values(std::size_t m) const { return values_.at(m); }
  const std::vector<Sample>& samples(std::size_t m) const { return samples_.at(m); }
  std::size_t valid(std::size_t m) const { return valid_.at(m); }
  double measured_seconds(std::size_t m) const { return measured_.at(m); }
  Summary summary(std::size_t m) const { return summarize(samples_.at(m), rule_); }
  const StoppingRule& rule() const { return rule_; }

 private:
  StoppingRule rule_;
  std::size_t rounds_ = 0;
  std::vector<std::vector<std::optional<double>>> values_;
  std::vector<std::vector<Sample>> samples_;
  std::vector<std::size_t> valid_;
  std::vector<double> measured_;
  std::vector<bool> retired_;
};

// The median interval of member m's valid samples; nullopt without any.
std::optional<Estimate> median_estimate(const GroupSamples& g, std::size_t m);
// Member m's speedup over member `reference` from the paired rounds; nullopt without a pair.
std::optional<Estimate> speedup_estimate(const GroupSamples& g, std::size_t m,
                                         std::size_t reference);

// True when the rule targets speedups: the baseline is a member and there is another (neither
// retired).
bool targets_speedup(const GroupSamples& g, std::optional<std::size_t> baseline);
// What the rule targets, for the report: "speedup_ci_half_width <= 0.03" or
// "time_median_ci_half_width <= 0.03" (relative half-widths of the 95% intervals).
std::string target_text(bool speedup, double target);

struct Assessment {
  bool minimums_met = false;  // every member has min_samples valid samples and min_time_s
  bool converged = false;     // minimums met and every targeted interval within the target
  // The widest relative half-width among the targeted intervals that reach the confidence; the
  // member it belongs to. Infinite while one of them is not computable yet.
  double widest = 0;
  std::size_t widest_member = 0;
};
Assessment assess(const GroupSamples& g, std::optional<std::size_t> baseline);

// Contention (contention.hpp) and a measurement's stop reason. Host-timed groups only (eager,
// graph, every CPU group); device-timed ones keep `stop`.
//   checked (each sample tested for preemption): converged stays (its valid samples waited for
//     no CPU); otherwise contended when preempted samples are at least kContendedDropShare of
//     all samples taken and at least kContendedMinDrops: preemption, not noise, kept it from its
//     interval (a slow prefill group of 20 samples that lost 2 to a daemon's wake-up is not);
//   not checked (its own threads outnumber the cores, or the run delay is unreadable): contended
//     when other processes used more than kContendedForeignCores cores on average meanwhile,
//     converged or not: nothing tells which of its samples they hit.
inline constexpr double kContendedDropShare = 0.10;
inline constexpr std::size_t kContendedMinDrops = 6;
inline constexpr double kContendedForeignCores = 0.25;
//   A member that lost every sample to preemption makes any such group contended: it has no
//   figure at all.
StopReason contention_stop(StopReason stop, bool host_timed, bool checked, std::size_t samples,
                           std::size_t dropped_preempted, std::optional<double> foreign_cores,
                           bool member_emptied = false);

// Converged, else max_samples (rounds), else timed_out (wall time >= max_time_s x members, once
// rule.timeout_min_rounds rounds are taken), else keep_going.
StopReason decide(const Assessment& a, const GroupSamples& g, double wall_elapsed_s);

}  // namespace fusebench::measure
