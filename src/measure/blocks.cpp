#include "measure/blocks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace fusebench::measure {
namespace {

double t_density(double x, double df) {
  const double log_c =
      std::lgamma((df + 1) / 2) - std::lgamma(df / 2) - 0.5 * std::log(df * 3.14159265358979323846);
  return std::exp(log_c - (df + 1) / 2 * std::log1p(x * x / df));
}

// P(0 <= T <= x) by Simpson's rule: the density is smooth, and x stays below ~100 for the
// quantiles asked here (df 1 at 99.5% is 63.7).
double t_mass_from_zero(double x, double df) {
  const int n = 2000;  // even
  const double h = x / n;
  double sum = t_density(0, df) + t_density(x, df);
  for (int i = 1; i < n; ++i) sum += (i % 2 == 1 ? 4 : 2) * t_density(i * h, df);
  return sum * h / 3;
}

std::optional<Estimate> pooled_median(const std::vector<std::optional<double>>& values,
                                      double confidence) {
  std::vector<double> v;
  for (const auto& x : values)
    if (x) v.push_back(*x);
  if (v.empty()) return std::nullopt;
  return median_with_ci(std::move(v), confidence);
}

// The pooled estimate, widened to the hull with the between-block interval where there is one.
std::optional<Estimate> widened(std::optional<Estimate> pooled, const BlockSpread& spread) {
  if (!pooled || !spread.between) return pooled;
  pooled->low = std::min(pooled->low, spread.between->low);
  pooled->high = std::max(pooled->high, spread.between->high);
  return pooled;
}

template <class Get>
BlockSpread spread_of(const std::vector<GroupMeasurement>& blocks, double confidence, Get get) {
  BlockSpread s;
  for (const GroupMeasurement& b : blocks) {
    if (const std::optional<Estimate>& e = get(b)) s.values.push_back(e->value);
  }
  s.between = between_blocks_interval(s.values, confidence);
  return s;
}

}  // namespace

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) {
    throw std::invalid_argument("student_t_quantile: p=" + std::to_string(p) +
                                ", df=" + std::to_string(df) + " (needs 0 < p < 1, df > 0)");
  }
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  // Every group of a sweep asks for the same few quantiles: computed once per thread.
  thread_local std::map<std::pair<double, double>, double> known;
  if (const auto it = known.find({p, df}); it != known.end()) return it->second;
  const double mass = p - 0.5;  // wanted P(0 <= T <= x)
  double lo = 0, hi = 1;
  while (t_mass_from_zero(hi, df) < mass) hi *= 2;
  for (int i = 0; i < 50; ++i) {
    const double mid = 0.5 * (lo + hi);
    (t_mass_from_zero(mid, df) < mass ? lo : hi) = mid;
  }
  return known[{p, df}] = 0.5 * (lo + hi);
}

std::optional<Estimate> between_blocks_interval(const std::vector<double>& values,
                                                double confidence) {
  const std::size_t b = values.size();
  if (b < 2) return std::nullopt;
  double sum = 0;
  for (double v : values) {
    if (!(v > 0)) return std::nullopt;
    sum += std::log(v);
  }
  const double mean = sum / static_cast<double>(b);
  double sq = 0;
  for (double v : values) sq += (std::log(v) - mean) * (std::log(v) - mean);
  const double sd = std::sqrt(sq / static_cast<double>(b - 1));
  const double half = student_t_quantile((1 + confidence) / 2, static_cast<double>(b - 1)) * sd /
                      std::sqrt(static_cast<double>(b));
  Estimate e;
  e.value = std::exp(mean);
  e.low = std::exp(mean - half);
  e.high = std::exp(mean + half);
  e.n = b;
  e.coverage = confidence;
  e.reaches_confidence = true;
  return e;
}

std::size_t blocks_that_fit(std::size_t asked, double round_s, double budget_s, std::string* note) {
  if (asked <= 1) return asked == 0 ? 1 : asked;
  const double fit = round_s > 0 ? budget_s / (static_cast<double>(kMinRoundsPerBlock) * round_s)
                                 : static_cast<double>(asked);
  const std::size_t n =
      fit >= static_cast<double>(asked) ? asked : static_cast<std::size_t>(std::max(0.0, fit));
  if (n >= kMinBlocks) return n;
  if (note != nullptr) {
    char buf[320];
    std::snprintf(buf, sizeof(buf),
                  "%zu blocks asked, but a round takes %.3g s, so fewer than %zu blocks of %zu "
                  "rounds fit the group's %.3g s budget: measured as one block, whose interval "
                  "does not include the spread between blocks (raise --timing-max-time)",
                  asked, round_s, kMinBlocks, kMinRoundsPerBlock, budget_s);
    *note = buf;
  }
  return 1;
}

StoppingRule block_rule(const StoppingRule& rule, std::size_t blocks) {
  StoppingRule r = rule;
  const double b = static_cast<double>(std::max<std::size_t>(1, blocks));
  r.min_time_s /= b;
  r.max_time_s /= b;
  r.timeout_min_rounds = std::max(rule.timeout_min_rounds, kMinRoundsPerBlock);
  return r;
}

GroupMeasurement combine_blocks(const std::vector<GroupMeasurement>& blocks,
                                const StoppingRule& rule) {
  if (blocks.empty()) throw std::invalid_argument("combine_blocks: no block");
  const std::size_t k = blocks.front().members.size();
  for (const GroupMeasurement& b : blocks) {
    if (b.members.size() != k || b.speedup.size() != k) {
      throw std::invalid_argument("combine_blocks: blocks of " + std::to_string(k) + " and " +
                                  std::to_string(b.members.size()) + " members");
    }
  }
  const double conf = rule.confidence;
  GroupMeasurement out;
  out.regime = blocks.front().regime;
  out.baseline = blocks.front().baseline;
  out.blocks = blocks.size();
  out.members.resize(k);
  out.median_blocks.resize(k);
  out.speedup.assign(k, std::vector<std::optional<Estimate>>(k));
  out.speedup_blocks.assign(k, std::vector<BlockSpread>(k));
  bool timed_out = false, max_samples = false;
  out.preemption_checked = true;
  out.contention_watched = true;
  double foreign_core_seconds = 0, psi_seconds = 0;
  bool foreign_known = true, psi_known = true;
  for (const GroupMeasurement& b : blocks) {
    out.rounds += b.rounds;
    out.wall_seconds += b.wall_seconds;
    out.preemption_checked = out.preemption_checked && b.preemption_checked;
    out.contention_watched = out.contention_watched && b.contention_watched;
    // The load over the blocks: their seconds summed, the averages weighted by them.
    out.load.wall_s += b.load.wall_s;
    foreign_known = foreign_known && b.load.foreign_cores.has_value();
    psi_known = psi_known && b.load.psi_some_fraction.has_value();
    foreign_core_seconds += b.load.foreign_cores.value_or(0) * b.load.wall_s;
    psi_seconds += b.load.psi_some_fraction.value_or(0) * b.load.wall_s;
    // A contended block ran out of valid samples as a timed-out one ran out of time; whether
    // the combined measurement is contended is decided on the totals below.
    timed_out = timed_out || b.stop == StopReason::timed_out || b.stop == StopReason::contended;
    max_samples = max_samples || b.stop == StopReason::max_samples;
  }
  for (std::size_t m = 0; m < k; ++m) {
    MemberMeasurement& r = out.members[m];
    r.runs_per_sample = std::numeric_limits<std::int64_t>::max();
    for (const GroupMeasurement& b : blocks) {
      const MemberMeasurement& bm = b.members[m];
      r.round_values.insert(r.round_values.end(), bm.round_values.begin(), bm.round_values.end());
      r.samples.insert(r.samples.end(), bm.samples.begin(), bm.samples.end());
      r.runs_per_sample = std::min(r.runs_per_sample, bm.runs_per_sample);
      r.block_timeouts += bm.block_timeouts;
      if (bm.gave_up && !r.gave_up) {
        r.gave_up = true;
        r.gave_up_reason = bm.gave_up_reason;
      }
    }
    r.summary = summarize(r.samples, rule);
    out.median_blocks[m] =
        spread_of(blocks, conf, [m](const GroupMeasurement& b) -> const std::optional<Estimate>& {
          return b.members[m].median;
        });
    r.median = widened(pooled_median(r.round_values, conf), out.median_blocks[m]);
  }
  for (std::size_t m = 0; m < k; ++m) {
    for (std::size_t j = 0; j < k; ++j) {
      if (j == m) continue;
      out.speedup_blocks[m][j] = spread_of(
          blocks, conf, [m, j](const GroupMeasurement& b) -> const std::optional<Estimate>& {
            return b.speedup[m][j];
          });
      out.speedup[m][j] =
          widened(paired_speedup(out.members[j].round_values, out.members[m].round_values, conf),
                  out.speedup_blocks[m][j]);
    }
  }
  // What the blocks targeted, and how wide it is once combined.
  out.targets_speedup =
      out.baseline && std::any_of(blocks.begin(), blocks.end(),
                                  [](const GroupMeasurement& b) { return b.targets_speedup; });
  out.target = target_text(out.targets_speedup, rule.target_ci);
  bool first = true;
  for (std::size_t m = 0; m < k; ++m) {
    if (out.members[m].gave_up || (out.targets_speedup && m == *out.baseline)) continue;
    const auto& e = out.targets_speedup ? out.speedup[m][*out.baseline] : out.members[m].median;
    const double w = e && e->reaches_confidence ? e->relative_half_width()
                                                : std::numeric_limits<double>::infinity();
    if (first || w > out.widest) {
      out.widest = w;
      out.widest_member = m;
      first = false;
    }
  }
  if (first) out.widest = std::numeric_limits<double>::infinity();
  // The combined interval is what is reported, so it decides convergence; a block that ran out
  // of its share of the time says why the combined one is still wide.
  if (out.widest <= rule.target_ci) {
    out.stop = StopReason::converged;
  } else if (timed_out) {
    out.stop = StopReason::timed_out;
  } else if (max_samples) {
    out.stop = StopReason::max_samples;
  } else {
    out.stop = StopReason::blocks_disagree;
  }
  if (out.load.wall_s > 0) {
    if (foreign_known) out.load.foreign_cores = foreign_core_seconds / out.load.wall_s;
    if (psi_known) out.load.psi_some_fraction = psi_seconds / out.load.wall_s;
  }
  apply_contention(out);
  return out;
}

GroupMeasurement measure_in_blocks(Regime regime, Backend& backend,
                                   std::vector<TimedMember>& members,
                                   std::optional<std::size_t> baseline,
                                   const EngineSettings& settings, std::size_t blocks,
                                   const std::function<void()>& between,
                                   const AfterBlock& after_block) {
  if (blocks <= 1) {
    GroupMeasurement g = measure_group(regime, backend, members, baseline, settings);
    if (after_block) after_block(0, 1, g);
    return g;
  }
  const BlockPlan plan = plan_blocks(backend, members, settings, blocks);
  std::vector<GroupMeasurement> done;
  done.reserve(plan.blocks);
  for (std::size_t b = 0; b < plan.blocks; ++b) {
    if (b > 0 && between) between();
    done.push_back(measure_group(regime, backend, members, baseline, plan.per_block));
    if (after_block) after_block(b, plan.blocks, done.back());
  }
  GroupMeasurement out =
      plan.blocks == 1 ? std::move(done.front()) : combine_blocks(done, settings.rule);
  label(out, plan);
  return out;
}

BlockPlan plan_blocks(Backend& backend, std::vector<TimedMember>& members,
                      const EngineSettings& settings, std::size_t asked) {
  BlockPlan plan;
  plan.asked = asked;
  plan.per_block = settings;
  if (asked <= 1) return plan;
  // The round's cost decides how many blocks the budget affords.
  plan.blocks =
      blocks_that_fit(asked, time_one_round(backend, members),
                      settings.rule.max_time_s * static_cast<double>(members.size()), &plan.note);
  if (plan.blocks <= 1) return plan;  // one measurement under the whole budget; note says why
  plan.per_block.rule = block_rule(settings.rule, plan.blocks);
  if (plan.blocks < asked) {
    plan.note = std::to_string(plan.blocks) + " of the " + std::to_string(asked) +
                " blocks asked fit the group's budget at " + std::to_string(kMinRoundsPerBlock) +
                " rounds each";
  }
  return plan;
}

void label(GroupMeasurement& g, const BlockPlan& plan) {
  g.blocks_asked = plan.asked;
  g.blocks_note = plan.note;
}

double time_one_round(Backend& backend, std::vector<TimedMember>& members) {
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t m = 0; m < members.size(); ++m) {
    try {
      members[m].run_set(0);
      backend.synchronize();
    } catch (const std::exception& e) {
      throw MemberFailure(m, e.what());
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string blocks_method_text(double confidence) {
  const int pct = static_cast<int>(std::lround(confidence * 100));
  return "a group measured in B > 1 blocks (timing_blocks; --timing-blocks, by default " +
         std::to_string(kAutoCpuBlocks) +
         " on the CPU backend, else 1) is B interleaved measurements, each with 1/B of the time "
         "budget and at least " +
         std::to_string(kMinRoundsPerBlock) +
         " rounds, each on fresh buffers and TP ranks, taken in turn with the blocks of the "
         "neighbouring groups (up to 30 s of their timeouts), B reduced to what the budget "
         "affords (timing_blocks_note). Value: the median of all blocks' paired ratios (or "
         "samples) pooled. Interval: the hull of the pooled " +
         std::to_string(pct) +
         "% order-statistic interval and the Student-t interval of the mean of the blocks' log "
         "estimates (B-1 degrees of freedom), so what holds for one measurement but not the next "
         "(thread scheduling, where buffers landed) widens the interval instead of shifting it "
         "unseen. Per-block values: speedup_blocks, time_median_blocks; stop blocks_disagree: "
         "every block converged but their spread keeps the combined interval above the target";
}

}  // namespace fusebench::measure
