#include "entry_fields.hpp"

#include <cmath>
#include <cstdio>

#include "fusebench/ops.hpp"
#include "fusebench/routing.hpp"
#include "measure/contention.hpp"

namespace fusebench::bench {

namespace {

// A member's statistics over all its samples, preempted ones included (all_preempted entries).
measure::Summary preempted_summary(const measure::MemberMeasurement& mm,
                                   const measure::StoppingRule& rule) {
  std::vector<measure::Sample> all = mm.samples;
  for (measure::Sample& x : all) x.preempted = false;
  measure::Summary s = measure::summarize(all, rule);
  s.dropped_preempted = mm.summary.dropped_preempted;
  return s;
}

// An interval is reported only where it exists at 95% (n >= 6): below that an entry has the
// value alone, and a note saying why (no [min, max] stand-in: it drew crossovers and failed the
// gate from one or two samples a side).
nlohmann::json estimate_json(const measure::Estimate& e) {
  nlohmann::json j = {{"speedup", e.value}, {"pairs", e.n}};
  if (e.reaches_confidence) {
    j["ci_low"] = e.low;
    j["ci_high"] = e.high;
  }
  return j;
}

nlohmann::json block_values(const measure::BlockSpread& s) { return s.values; }

// What contention did to a host-timed entry (measure/contention.hpp): preempted samples, how
// long its threads waited for a CPU, the host's load while its group was measured, and why a
// contended entry is not judged.
void add_contention(const measure::GroupMeasurement& g, const measure::Summary& s,
                    nlohmann::json& fields, std::map<std::string, double>& c) {
  const bool host_timed = g.regime == measure::Regime::eager || g.regime == measure::Regime::graph;
  if (!host_timed) return;  // device time: a preempted host thread does not enter it
  if (!g.contention_watched) {
    // The binary leaves the run delay unread only for a multi-process run whose ranks fill the
    // cores (engine_for_active).
    fields["preemption_unchecked"] =
        "contention not judged: no run delay was read (in fusebench, a multi-process run whose "
        "ranks' threads outnumber this machine's cores: the other ranks are processes of their "
        "own, so their waits and CPU time cannot be told from a neighbour's)";
  } else if (g.preemption_checked) {
    c["samples_dropped_preempted"] = static_cast<double>(s.dropped_preempted);
  } else {
    fields["preemption_unchecked"] =
        s.waited_known ? "this group's own threads (TP ranks and lanes, or a grouped step's region "
                         "beside the GEMM libraries' spinning workers) outnumber the cores, so "
                         "their waits for a CPU are their own: samples are not dropped; the "
                         "group is contended when other processes took CPU time meanwhile"
                       : "the run delay of this process's threads is unreadable here "
                         "(context.contention): no sample was checked";
  }
  if (s.waited_known && s.waited_over_s > 0) c["host_wait_fraction"] = s.waited_s / s.waited_over_s;
  if (g.load.foreign_cores) c["host_foreign_cores"] = *g.load.foreign_cores;
  if (g.load.psi_some_fraction) c["host_psi_cpu_some"] = *g.load.psi_some_fraction;
  if (g.stop == measure::StopReason::contended) {
    char buf[320];
    if (g.preemption_checked) {
      std::snprintf(buf, sizeof(buf),
                    "not judged: contended: %zu of this entry's samples were preempted (its "
                    "threads waited for a CPU for over %.0f%% of the sample), which kept its "
                    "group from a valid interval",
                    s.dropped_preempted, measure::kPreemptedFraction * 100);
    } else {
      std::snprintf(buf, sizeof(buf),
                    "not judged: contended: other processes used %.2f cores on average while "
                    "this group (whose own threads fill the cores) was measured",
                    g.load.foreign_cores.value_or(0));
    }
    fields["timing_contended_note"] = buf;
    c["contended"] = 1;  // so the console row says it too
  }
}

}  // namespace

std::string few_values_note(const measure::Estimate& e, const char* what) {
  return std::string("no 95% interval: only ") + std::to_string(e.n) + " " + what +
         " (the order-statistic interval of a median needs at least 6); not resolved by this run";
}

measure::Summary entry_summary(const measure::GroupMeasurement& g, std::size_t t,
                               const measure::StoppingRule& rule) {
  const measure::MemberMeasurement& mm = g.members[t];
  // Every sample preempted: the entry is not an error but a contended one, its times those of
  // the preempted samples (what the scheduler allowed), said so, and judged by nothing.
  const bool all_preempted = mm.summary.samples == 0 && mm.summary.dropped_preempted > 0 &&
                             g.stop == measure::StopReason::contended;
  return all_preempted ? preempted_summary(mm, rule) : mm.summary;
}

EntryResult timing_entry(const measure::GroupMeasurement& g, std::size_t t,
                         const measure::Summary& s, const measure::StoppingRule& rule,
                         std::size_t rotation_sets, const std::string& cache_policy) {
  const measure::MemberMeasurement& mm = g.members[t];
  const bool all_preempted = mm.summary.samples == 0 && s.samples > 0;
  EntryResult r;
  if (s.samples == 0) {
    r.error = "no valid sample: " + std::to_string(s.dropped_throttled) + " throttled, " +
              std::to_string(s.dropped_preempted) + " preempted, " +
              std::to_string(mm.block_timeouts) + " blocking-kernel timeouts";
    if (s.dropped_throttled > 0 && s.all_clock_mhz_min) {
      r.error += " (sample clocks " + std::to_string(std::lround(*s.all_clock_mhz_min)) + "-" +
                 std::to_string(std::lround(*s.all_clock_mhz_max)) + " MHz; below " +
                 std::to_string(std::lround(rule.throttle_fraction * rule.reference_clock_mhz)) +
                 " MHz counts as throttled)";
    }
    if (mm.block_timeouts > 0 && mm.runs_per_sample == 1) {
      r.error +=
          " (even one run could not be enqueued behind the blocking kernel: either something "
          "in the region waits for the stream, e.g. a synchronous copy inside the library, or "
          "the host-mapped release flag does not reach the GPU, in which case every batch and "
          "cold member fails so; time it with --timing=eager or graph)";
    }
    if (mm.gave_up) {
      r.error += "; its sampling stopped: " + mm.gave_up_reason +
                 ", so the rest of its group was measured without waiting for it";
    }
    return r;
  }
  r.seconds = s.median;
  auto& c = r.counters;
  auto& fields = r.fields;
  if (all_preempted) {
    fields["time_median_note"] =
        "every sample was preempted (timing_stop: contended): time_median and its statistics "
        "are those of the preempted samples, what the scheduler allowed, not the code's time";
  }
  c["time_median"] = s.median;
  c["time_mean"] = s.mean;
  c["time_min"] = s.min;
  c["time_cv"] = s.cv;
  c["samples"] = all_preempted ? 0.0 : static_cast<double>(s.samples);
  c["samples_dropped_throttled"] = static_cast<double>(s.dropped_throttled);
  add_contention(g, s, fields, c);
  c["runs_per_sample"] = static_cast<double>(mm.runs_per_sample);
  c["rotation_sets"] = static_cast<double>(rotation_sets);
  c["timing_rounds"] = static_cast<double>(g.rounds);
  c["timing_blocks"] = static_cast<double>(g.blocks);
  if (!g.blocks_note.empty()) fields["timing_blocks_note"] = g.blocks_note;
  if (g.blocks > 1 && t < g.median_blocks.size())
    fields["time_median_blocks"] = block_values(g.median_blocks[t]);
  c["converged"] = g.stop == measure::StopReason::converged ? 1 : 0;
  if (g.regime == measure::Regime::batch || g.regime == measure::Regime::cold)
    c["samples_dropped_block_timeout"] = static_cast<double>(mm.block_timeouts);
  if (mm.median) {
    if (mm.median->reaches_confidence) {
      c["time_median_ci_low"] = mm.median->low;
      c["time_median_ci_high"] = mm.median->high;
    } else {
      fields["time_median_ci_note"] = few_values_note(*mm.median, "samples");
    }
  }
  fields["timing"] = measure::to_string(g.regime);
  fields["timing_stop"] = measure::to_string(g.stop);
  fields["timing_target"] = g.target;
  fields["cache_policy"] = cache_policy;

  return r;
}

void add_comparison(const measure::GroupMeasurement& g, std::size_t t, const Comparison& cmp,
                    EntryResult& r) {
  auto& c = r.counters;
  auto& fields = r.fields;
  const std::vector<std::string>& variants = cmp.variants;
  const std::string& baseline = cmp.baseline;
  fields["interleaved_with"] = variants;
  fields["speedup_baseline"] = baseline;
  nlohmann::json over = nlohmann::json::object();
  for (std::size_t j = 0; j < variants.size(); ++j) {
    if (j != t && g.speedup[t][j]) over[variants[j]] = estimate_json(*g.speedup[t][j]);
  }
  fields["speedup_over"] = over;
  if (cmp.variant == baseline) return;
  if (!g.baseline) {
    fields["speedup_unavailable"] = cmp.baseline_missing + ": no speedup";
    return;
  }
  if (const auto& e = g.speedup[t][*g.baseline]) {
    c["speedup"] = e->value;
    if (e->reaches_confidence) {
      c["speedup_ci_low"] = e->low;
      c["speedup_ci_high"] = e->high;
    }
    c["speedup_pairs"] = static_cast<double>(e->n);
    if (g.blocks > 1) {
      const measure::BlockSpread& spread = g.speedup_blocks[t][*g.baseline];
      fields["speedup_blocks"] = block_values(spread);
      if (spread.between)
        fields["speedup_ci_between_blocks"] = {spread.between->low, spread.between->high};
    }
    if (!e->reaches_confidence) fields["speedup_ci_note"] = few_values_note(*e, "pairs");
  } else {
    fields["speedup_unavailable"] =
        "no round has valid samples of both this variant and " + baseline;
  }
}

void add_clocks(const measure::Summary& s, bool has_device, EntryResult& r) {
  auto& c = r.counters;
  if (s.clock_mhz_mean) {
    c["sm_clock_mhz"] = *s.clock_mhz_mean;
    c["sm_clock_min_mhz"] = *s.clock_mhz_min;
    c["sm_clock_max_mhz"] = *s.clock_mhz_max;
  }
  if (s.all_clock_mhz_min) {
    c["sm_clock_all_min_mhz"] = *s.all_clock_mhz_min;
    c["sm_clock_all_max_mhz"] = *s.all_clock_mhz_max;
  }
  if (!s.clock_mhz_mean) {
    r.fields["sm_clock_unavailable"] =
        !has_device ? "no GPU: the CPU clock is not read; no sample is dropped"
                    : "the clock probe returned no reading";
  }
}

void add_model_cost(const Cost& cost, std::int64_t tokens, int tp, EntryResult& r) {
  auto& c = r.counters;
  c["model_flops"] = cost.flops;
  c["model_bytes"] = cost.bytes;
  c["model_launches"] = cost.launches;
  c["model_intensity"] = cost.arithmetic_intensity();
  c["tokens"] = static_cast<double>(tokens);
  c["tp"] = tp;
}

void add_op_fields(const Plan& plan, EntryResult& r) {
  const OpInfo& op = find_op(plan.op);
  if (op.entry_fields) op.entry_fields(plan, r.fields);
}

}  // namespace fusebench::bench
