#pragma once
// When to fuse: turns the paired speedups of one or more fusebench reports into a dispatch table
// (docs/advise.md). Per comparison (device, backend, model, layer, op, dtype, tp, timing regime,
// weights, communicator) and measured token count, a variant is `use:` only where the 95%
// intervals say it beats every alternative by more than the margin; the token ranges between
// measured counts follow the cost model where it agrees with both neighbours. Depends on
// nlohmann_json only (the gate links it: a decision that flipped fails the gate).
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "fusebench/evidence.hpp"
#include "fusebench/report_entry.hpp"

namespace fusebench::advise {

// InputError (the reader's, fusebench/report_document.hpp): input the advisor cannot judge.

inline constexpr int kSchemaVersion = 1;
inline constexpr double kDefaultMargin = 0.03;
// An interval is evidence only when it rests on at least kMinIntervalValues pairs (below it a
// report gives [min, max], whose coverage is lower than 95%): fusebench/evidence.hpp.

// One benchmark entry: the shared reader's (fusebench/report_entry.hpp), every field the advisor
// reads; the advisor keeps the iterations (repetitions) of fusebench fixtures.
using Entry = ReportEntry;

struct Ceilings {
  double peak_flops = 0, bandwidth = 0;
  std::string source;
};

struct Report {
  std::string file, device, backend, git_revision, date;
  nlohmann::json context;
  std::vector<Entry> entries;
  std::vector<std::string> skipped;  // entries not read, and why
  std::optional<Ceilings> ceilings_for(const std::string& dtype) const;
};

// "gpu: NVIDIA H200" or "cpu: AMD EPYC" (the gate's device identity: the same function).
std::string device_identity(const nlohmann::json& context);

Report parse_report(std::string_view text, const std::string& file);
Report load_report(const std::string& path);

enum class Decision { kUse, kEither, kUnresolved };
const char* to_string(Decision d);

// One report's (one repetition's) ratio of `variant` over `over` at one token count.
struct Observation {
  int report = 0, repetition = 0;
  std::string entry;  // the entry the ratio was read from
  Ratio ratio;
  bool inverted = false;  // read from the other entry's ratio, inverted
  bool modelled = false;
  std::string excluded;  // why it is no evidence; empty when it is
};

// Pooled evidence for one pair at one token count.
struct PairEvidence {
  std::string variant, over;
  std::vector<Observation> observations;
  bool has_interval = false;  // some observation is evidence
  double speedup = 0, low = 0, high = 0;
  int pairs = 0;
  std::string state;    // "beats", "loses", "within", "straddles", "no evidence"
  std::string note;     // e.g. "the reports' intervals do not overlap"
  std::string pooling;  // how several runs were pooled ("" for one run)
};

struct ModelPoint {
  std::string label;                      // the cost model's decision at this token count
  std::map<std::string, double> seconds;  // per variant
  std::map<std::string, std::array<double, 3>> counters;  // per variant: flops, bytes, launches
};

struct Point {
  std::int64_t tokens = 0;
  Decision decision = Decision::kUnresolved;
  std::vector<std::string> variants;  // use: the one; either: the tied set
  std::string label;  // "use: fused", "either", "unresolved", "modelled: use: fused"
  std::string reason;
  std::vector<PairEvidence> pairs;
  std::vector<std::string> skipped;  // entries at this token count that are not evidence at all
  std::vector<int> reports;
  std::optional<ModelPoint> model;
};

// How accurate a quantized variant is beside the comparison's baseline (docs/advise.md,
// "Accuracy"), over every measured token count and report.
struct VariantAccuracy {
  double worst = 0;  // its largest quant_error of any shard
  std::string worst_shard;
  std::int64_t worst_tokens = 0;
  // Its largest growth of a shard's quant_error over the baseline variant's at the same token
  // count and run (absolute; 0 when never above it), where and from what.
  double growth = 0, growth_from = 0;
  std::string growth_shard;
  std::int64_t growth_tokens = 0;
  std::optional<double> vs_split;  // its largest quant_error_vs_split, when it has one
  bool less_accurate = false;      // growth beyond kLessAccurateRelative and kLessAccurateAbsolute
};
// A variant is "less accurate" than the baseline where a shard's quant_error grew by more than
// 1% of the baseline's and more than 1e-4 (rounding of an exact fusion stays below both).
inline constexpr double kLessAccurateRelative = 0.01;
inline constexpr double kLessAccurateAbsolute = 1e-4;

struct Range {
  std::int64_t low = 0, high = 0;
  Decision decision = Decision::kUnresolved;
  std::vector<std::string> variants;
  std::string label;
  std::string basis;              // "measured", "cost model", "not measured"
  std::string low_end, high_end;  // how each end was placed
  std::string reason;
  std::vector<std::int64_t> points;  // the measured token counts inside it (its evidence)
  // Where a variant it runs is less accurate than the baseline: says so, e.g. "fused is less
  // accurate than split: ..." (docs/advise.md, "Accuracy"); empty otherwise.
  std::string accuracy;
};

struct Key {
  std::string device, backend, model, layer, op, dtype, timing, weights, comm;
  int tp = 1;
  auto tie() const {
    return std::tie(device, backend, model, layer, op, dtype, tp, timing, weights, comm);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
  bool operator==(const Key& o) const { return tie() == o.tie(); }
  std::string text() const;  // "qkv model:qwen3-0.6b layer:attention dtype:fp32 tp:1 ..."
};

struct Comparison {
  Key key;
  bool modelled = false;
  std::vector<std::string> variants;  // baseline first
  std::string baseline;
  std::vector<Point> points;
  std::vector<Range> ranges;
  std::vector<int> reports;
  std::string model_note;  // how the cost model was evaluated, or why not
  std::optional<Ceilings> ceilings;
  double launch_overhead_s = 0;
  std::map<std::string, VariantAccuracy> accuracy;  // per quantized variant; empty otherwise
  bool emulated = false;  // some entry's times are an emulation (docs/quant.md)
  const Point* point(std::int64_t tokens) const;
};

// TP or EP (tp_moe, issue 40; docs/advise.md "TP or EP"): per token count the fastest of tp and
// the expert-parallel variants, measured where the comparison decided it, else the cost model's
// prediction (labelled modelled), and where the fastest changes side.
struct EpPoint {
  std::int64_t tokens = 0;
  std::vector<std::string> fastest;  // one variant, or a measured tied set
  std::string basis;                 // "measured", "modelled" or "none"
  std::string side;                  // "tp", "ep", "either" (a tie across both) or ""
  std::string label;                 // "measured: ep_ar", "modelled: tp", "unresolved"
  std::string reason;
  std::map<std::string, double> predicted_seconds;  // per variant (modelled)
};
struct EpCrossover {
  std::int64_t below = 0, at = 0;  // the side changes between these measured token counts
  std::string from, to;            // the two points' labels
  std::string basis;               // "measured", "modelled" or "measured and modelled"
};
struct EpAdvice {
  Key key;
  std::vector<EpPoint> points;
  std::vector<EpCrossover> crossovers;
  std::string summary;  // "EP (ep_ar) beats TP from 256 tokens (...)"
};

struct Table {
  double margin = kDefaultMargin;
  std::vector<Report> reports;  // entries dropped after use; the metadata stays
  std::vector<Comparison> comparisons;
  std::vector<std::string> skipped;  // comparisons not advised on, and why
  std::vector<EpAdvice> ep_vs_tp;    // tp_moe comparisons at tp > 1 (ep_advice.hpp)
};

Table build(std::vector<Report> reports, double margin = kDefaultMargin);

// "fused is less accurate than split: quant_error of shard q 0.0412 vs 0.0361 (+14.1%) at 16
// tokens; quant_error_vs_split up to 0.0123", or "" where the variant is not less accurate.
std::string accuracy_caveat(const Comparison& c, const std::string& variant);
// One line per quantized variant: "split 0.0361; fused 0.0412 (...)"; "" without quant_error.
std::string accuracy_summary(const Comparison& c);

// The four outputs, all from one Table.
nlohmann::json to_json(const Table& table);
std::string to_markdown(const Table& table);
std::string to_cpp(const Table& table);
std::string to_python(const Table& table);

// Throws InputError naming the value for a margin outside [0, 1) or not a number.
double parse_margin(const std::string& text, const std::string& flag = "--margin");

// fusebench-advise's command line: 0 written, 2 unusable input.
int run_cli(int argc, const char* const* argv, std::ostream& out, std::ostream& err);

}  // namespace fusebench::advise
