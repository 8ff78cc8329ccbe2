#pragma once
// The one reader of a report's entries (issue 36): every field of a "benchmarks" element that the
// gate or the advisor reads (docs/report.md), read and checked once, into one ReportEntry. The
// gate folds an entry's repetitions and aggregates into its time and noise; the advisor pools the
// paired speedups; each keeps its own verdicts, neither reads the JSON of an entry itself.
// Errors are InputError "FILE: benchmarks[I] (NAME).FIELD: what", naming the value.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusebench/evidence.hpp"
#include "fusebench/report_document.hpp"

namespace fusebench::advise {

// The segments of an entry name: "op", "variant" and each key:value ("qkv/fused/model:m/..."
// -> {op: qkv, variant: fused, model: m, ...}); shared by the advisor and the gate.
std::map<std::string, std::string> name_segments(const std::string& name);

// A paired ratio `speedup` of one variant over another as an entry states it: speedup,
// speedup_ci_low, speedup_ci_high, speedup_pairs (or, in speedup_over, speedup, ci_low, ci_high,
// pairs). The interval's bounds come both or neither.
struct Ratio {
  double speedup = 0;
  std::optional<double> low, high;
  std::optional<int> pairs;
};

// One element of "benchmarks". An iteration (a run or one repetition of it) has every field; an
// aggregate of repetitions (mean, median, stddev, cv) has its header, time, counters and speedup,
// which are statistics of its repetitions' (its other fields are left empty).
struct ReportEntry {
  ElementHeader header;  // the element's own name, run type, error and place ("benchmarks[3] (N)")
  std::string name;      // run_name: the entry's name, shared by its repetitions and aggregates

  // Time. real_time in the element's time_unit (ns, us, ms or s: ns_per_unit); 0 where the
  // element reports an error. An aggregate's name (aggregate_name), and whether its real_time is
  // a fraction (cv, or aggregate_unit "percentage") rather than a time.
  double real_time = 0;
  double ns_per_unit = 1;
  std::string aggregate;
  bool fraction = false;
  int repetition = 0;  // repetition_index

  // What the fixture measured: the element's field, else its name's segment ("model:m"); the
  // backend else the report's context.backend. tokens 0 where neither says; tp 1.
  std::string op, variant, model, layer, dtype, timing, weights, comm, backend;
  std::int64_t tokens = 0;
  int tp = 1;

  // The paired speedup over speedup_baseline, and over every variant measured with it
  // (speedup_over); speedup_ci_note says why it has no interval.
  std::optional<Ratio> speedup;
  std::map<std::string, Ratio> over;
  std::string speedup_baseline, speedup_ci_note;

  // Evidence: how the group's timing stopped, samples dropped while preempted, whether the
  // communication was modelled (comm_modelled 1, comm:modelled), and the shared "not judged"
  // contract of its timing_stop, speedup_pairs and samples (fusebench/evidence.hpp).
  std::string timing_stop;
  std::optional<double> samples_dropped_preempted;
  bool modelled = false;
  NotJudged not_judged;

  // Counters: every numeric field but Google Benchmark's structural ones (iterations, real_time,
  // repetition_index, ...): launches, bytes, model_*, samples, cv, time_median_ci_low, ...; and
  // counters_unavailable, counter -> why it could not be read (informational: well-formed
  // reasons only).
  std::map<std::string, double> counters;
  std::map<std::string, std::string> counters_unavailable;
  std::optional<double> counter(const std::string& key) const;

  // A quantized entry's accuracy (docs/report.md): "quant_error" and "quant_error_vs_split",
  // each output shard -> a relative error >= 0; a field absent is absent here.
  std::map<std::string, std::map<std::string, double>> accuracy;
  const std::map<std::string, double>& quant_error() const;
  const std::map<std::string, double>& quant_error_vs_split() const;

  // What the entry measured that its name does not say, field -> value as text (a string as it
  // is, anything else as JSON): moe.routing.{routing, seed, experts, top_k}, quant.spec,
  // emulated, dtype (docs/gate.md, "Identity of entries"). From them: whether its times are an
  // emulation (emulated true), the moe routing as one text ("routing zipf:1.2, seed 7") and the
  // quant.spec ("fp8:channel").
  std::map<std::string, std::string> setup;
  bool emulated = false;
  std::string routing, quant_spec;

  // A tp_moe entry's cost-model pipeline time (moe_ranks.predicted.pipeline_seconds; modelled),
  // what the TP-or-EP advice falls back on where the measurement decides nothing (ep_advice.hpp).
  std::optional<double> predicted_pipeline_seconds;
};

// Every element of the report's "benchmarks", in order, after the rules every element follows
// (read_elements). Throws InputError naming the file, the element, the field and the value: a
// time_unit other than ns, us, ms or s; an aggregate without aggregate_name; a field of the wrong
// type; a speedup interval with one bound, without its speedup, with a bound or speedup <= 0 or
// low > high (an iteration's or a mean's: a stddev or cv of the bounds is no interval); pairs
// that are no count; tokens or tp that are no positive integer; a malformed accuracy field.
std::vector<ReportEntry> read_report_entries(const nlohmann::json& root, const std::string& file);

}  // namespace fusebench::advise
