#include "measure/interleave.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace fusebench::measure {

std::vector<std::size_t> round_order(std::size_t members, std::size_t round) {
  std::vector<std::size_t> order(members);
  for (std::size_t j = 0; j < members; ++j) order[j] = (round + j) % members;
  return order;
}

GroupSamples::GroupSamples(std::size_t members, StoppingRule rule)
    : rule_(rule),
      values_(members),
      samples_(members),
      valid_(members, 0),
      measured_(members, 0),
      retired_(members, false) {
  if (members == 0) throw std::invalid_argument("GroupSamples: a group needs a member");
}

void GroupSamples::begin_round() {
  ++rounds_;
  for (auto& v : values_) v.resize(rounds_);
}

void GroupSamples::add(std::size_t m, const std::optional<Sample>& s) {
  if (rounds_ == 0) throw std::logic_error("GroupSamples::add before begin_round");
  if (!s) return;
  samples_.at(m).push_back(*s);
  if (is_dropped(*s, rule_)) return;
  values_.at(m).back() = s->seconds;
  ++valid_[m];
  measured_[m] += s->total_seconds;
}

std::optional<Estimate> median_estimate(const GroupSamples& g, std::size_t m) {
  std::vector<double> v;
  v.reserve(g.valid(m));
  for (const auto& x : g.values(m)) {
    if (x) v.push_back(*x);
  }
  if (v.empty()) return std::nullopt;
  return median_with_ci(std::move(v), g.rule().confidence);
}

std::optional<Estimate> speedup_estimate(const GroupSamples& g, std::size_t m,
                                         std::size_t reference) {
  return paired_speedup(g.values(reference), g.values(m), g.rule().confidence);
}

bool targets_speedup(const GroupSamples& g, std::optional<std::size_t> baseline) {
  if (!baseline || *baseline >= g.members() || g.retired(*baseline)) return false;
  for (std::size_t m = 0; m < g.members(); ++m) {
    if (m != *baseline && !g.retired(m)) return true;
  }
  return false;
}

std::string target_text(bool speedup, double target) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", target);
  return std::string(speedup ? "speedup_ci_half_width" : "time_median_ci_half_width") +
         " <= " + buf;
}

Assessment assess(const GroupSamples& g, std::optional<std::size_t> baseline) {
  const StoppingRule& rule = g.rule();
  Assessment a;
  a.minimums_met = true;
  for (std::size_t m = 0; m < g.members(); ++m) {
    if (g.retired(m)) continue;
    if (g.valid(m) < rule.min_samples || g.measured_seconds(m) < rule.min_time_s)
      a.minimums_met = false;
  }
  const bool speedup = targets_speedup(g, baseline);
  bool within = true, first = true;
  for (std::size_t m = 0; m < g.members(); ++m) {
    if (g.retired(m) || (speedup && m == *baseline)) continue;
    const auto e = speedup ? speedup_estimate(g, m, *baseline) : median_estimate(g, m);
    // An interval that does not reach the confidence (too few values) is not narrow enough,
    // however narrow it looks.
    const double w = e && e->reaches_confidence ? e->relative_half_width()
                                                : std::numeric_limits<double>::infinity();
    if (first || w > a.widest) {
      a.widest = w;
      a.widest_member = m;
      first = false;
    }
    if (!(w <= rule.target_ci)) within = false;
  }
  // Nothing left to measure is not convergence (every member retired).
  a.converged = a.minimums_met && within && !first;
  return a;
}

StopReason decide(const Assessment& a, const GroupSamples& g, double wall_elapsed_s) {
  const StoppingRule& rule = g.rule();
  if (a.converged) return StopReason::converged;
  if (g.rounds() >= rule.max_samples) return StopReason::max_samples;
  if (wall_elapsed_s >= rule.max_time_s * static_cast<double>(g.members()) &&
      g.rounds() >= rule.timeout_min_rounds)
    return StopReason::timed_out;
  return StopReason::keep_going;
}

StopReason contention_stop(StopReason stop, bool host_timed, bool checked, std::size_t samples,
                           std::size_t dropped_preempted, std::optional<double> foreign_cores,
                           bool member_emptied) {
  if (!host_timed || stop == StopReason::keep_going) return stop;
  if (checked && member_emptied && stop != StopReason::converged) return StopReason::contended;
  if (checked) {
    if (stop == StopReason::converged || dropped_preempted < kContendedMinDrops) return stop;
    return static_cast<double>(dropped_preempted) >=
                   kContendedDropShare * static_cast<double>(std::max<std::size_t>(samples, 1))
               ? StopReason::contended
               : stop;
  }
  return foreign_cores && *foreign_cores > kContendedForeignCores ? StopReason::contended : stop;
}

}  // namespace fusebench::measure
