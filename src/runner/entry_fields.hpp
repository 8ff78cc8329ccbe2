#pragma once
// An entry's report fields from its member's measurement: the pure parts of what GroupRunner
// hands each fixture (timing, the comparison, clocks, the cost model), kept apart from the
// stateful ones (counter passes, ceilings, the TP report) so that each can be tested on a
// synthetic measurement. GroupRunner::result_for calls them in report order.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/cost_model.hpp"
#include "measure/timing_engine.hpp"

namespace fusebench::bench {

// One entry's result: what Google Benchmark gets (the iteration time and counters) and the
// fields merged into the entry in the report.
struct EntryResult {
  std::string error;         // non-empty: the fixture failed (SkipWithError)
  bool interrupted = false;  // not measured: the sweep was stopped first (kNotMeasuredInterrupted)
  double seconds = 0;        // median time per run (SetIterationTime)
  std::map<std::string, double> counters;
  nlohmann::json fields = nlohmann::json::object();
};

// The statistics an entry reports for member `t` of `g`: its own summary, or, when every sample
// was preempted in a contended group, the summary of those preempted samples (what the
// scheduler allowed; the entry says so).
measure::Summary entry_summary(const measure::GroupMeasurement& g, std::size_t t,
                               const measure::StoppingRule& rule);

// The timing part of member `t`'s entry: an error naming why no sample was valid, else the
// median time and its statistics, interval (only where it reaches 95%), contention, blocks and
// the timing fields. `s` is entry_summary's.
EntryResult timing_entry(const measure::GroupMeasurement& g, std::size_t t,
                         const measure::Summary& s, const measure::StoppingRule& rule,
                         std::size_t rotation_sets, const std::string& cache_policy);

// Who member `t` was measured with (`variants`, in engine order) and its speedup over each;
// the speedup over the baseline as counters. `baseline_missing` says why there is none when the
// group has no baseline member (not selected, failed, not in the run).
struct Comparison {
  std::vector<std::string> variants;  // the timed members' variants, in engine order
  std::string variant;                // this entry's
  std::string baseline;               // the group's baseline variant
  std::string baseline_missing;       // why the baseline was not measured with it
};
void add_comparison(const measure::GroupMeasurement& g, std::size_t t, const Comparison& cmp,
                    EntryResult& r);

// The clock the samples ran at (GPU) or why none was read.
void add_clocks(const measure::Summary& s, bool has_device, EntryResult& r);

// The cost model's figures and the entry's axes as counters.
void add_model_cost(const Cost& cost, std::int64_t tokens, int tp, EntryResult& r);

// The fields the plan's op adds to its entries (OpInfo::entry_fields: the moe op's routing and
// padding); nothing for an op that adds none.
void add_op_fields(const Plan& plan, EntryResult& r);

// "no 95% interval: only n pairs ...": the note of an estimate with too few values.
std::string few_values_note(const measure::Estimate& e, const char* what);

}  // namespace fusebench::bench
