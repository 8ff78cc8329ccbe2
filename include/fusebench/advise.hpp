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

namespace fusebench::advise {

// Input the advisor cannot judge; what() names the file, the field and the value.
// The segments of an entry name: "op", "variant" and each key:value ("qkv/fused/model:m/..."
// -> {op: qkv, variant: fused, model: m, ...}); shared by the advisor and the gate.
std::map<std::string, std::string> name_segments(const std::string& name);

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kSchemaVersion = 1;
inline constexpr double kDefaultMargin = 0.03;
// An interval is evidence only when it rests on at least kMinIntervalValues pairs (below it a
// report gives [min, max], whose coverage is lower than 95%): fusebench/evidence.hpp.

// A paired ratio `speedup` of one variant over another as an entry states it.
struct Ratio {
  double speedup = 0;
  std::optional<double> low, high;
  std::optional<int> pairs;
};

// One benchmark entry, as far as the advisor reads it.
struct Entry {
  std::string name, op, variant, model, layer, dtype, timing, weights, comm, backend;
  std::int64_t tokens = 0;
  int tp = 1;
  int repetition = 0;
  bool error = false;
  std::string error_message;
  std::string timing_stop;
  std::optional<double> samples_dropped_preempted;
  bool modelled = false;  // comm_modelled = 1 or comm:modelled in the name
  std::string speedup_baseline, speedup_ci_note;
  std::optional<Ratio> speedup;       // over speedup_baseline
  std::map<std::string, Ratio> over;  // speedup_over
  std::optional<double> model_flops, model_bytes, model_launches, comm_bytes;
};

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

struct Range {
  std::int64_t low = 0, high = 0;
  Decision decision = Decision::kUnresolved;
  std::vector<std::string> variants;
  std::string label;
  std::string basis;              // "measured", "cost model", "not measured"
  std::string low_end, high_end;  // how each end was placed
  std::string reason;
  std::vector<std::int64_t> points;  // the measured token counts inside it (its evidence)
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
  const Point* point(std::int64_t tokens) const;
};

struct Table {
  double margin = kDefaultMargin;
  std::vector<Report> reports;  // entries dropped after use; the metadata stays
  std::vector<Comparison> comparisons;
  std::vector<std::string> skipped;  // comparisons not advised on, and why
};

Table build(std::vector<Report> reports, double margin = kDefaultMargin);

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
