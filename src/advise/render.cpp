// The four outputs of one advise::Table (docs/advise.md): JSON (versioned, with the evidence),
// Markdown (for people), a C++ header and a Python module (the same table and lookup).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "fusebench/advise.hpp"
#include "fusebench/ep_advice.hpp"

namespace fusebench::advise {
namespace {

std::string fmt(double v, const char* spec = "%.3f") {
  char buf[48];
  std::snprintf(buf, sizeof(buf), spec, v);
  return buf;
}

std::string default_layer(const std::string& op) {
  if (op == "qkv" || op == "tp_attn") return "attention";
  if (op == "gate_up" || op == "tp_mlp") return "dense";
  return "";
}

// C++ identifier: lower-case letters, digits and single underscores, starting with a letter.
std::string ident(const std::string& s) {
  static const std::set<std::string> reserved = {
      "and",      "auto",      "bool",   "break",  "case", "char",    "class",  "const",  "default",
      "delete",   "do",        "double", "else",   "enum", "float",   "for",    "if",     "int",
      "long",     "namespace", "new",    "not",    "or",   "private", "public", "return", "short",
      "signed",   "static",    "struct", "switch", "this", "true",    "false",  "try",    "union",
      "unsigned", "using",     "void",   "while",  "xor"};
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch)) {
      out += static_cast<char>(std::tolower(ch));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || !std::isalpha(static_cast<unsigned char>(out[0]))) out = "n" + out;
  if (reserved.count(out)) out += "_";
  return out;
}

// A C++ string literal: printable ASCII as is, the rest as three-digit octal escapes.
std::string cpp_str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch >= 0x20 && ch < 0x7f && ch != '?') {  // '?' escaped: no trigraphs
      out += static_cast<char>(ch);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", ch);
      out += buf;
    }
  }
  return out + "\"";
}

// A Python string literal (JSON's escapes are Python's).
std::string py_str(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', true); }

std::string md_cell(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') {
      out += "\\|";
    } else if (ch == '\n') {
      out += ' ';
    } else {
      out += ch;
    }
  }
  return out;
}

std::string tokens_span(std::int64_t lo, std::int64_t hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

struct Dispatch {
  std::string table_id;         // "device|model|dtype|tp|timing"
  std::string op_key;           // what choose() takes
  std::vector<std::string> ns;  // namespace path below fusebench::advice
};

// The key choose() is called with, and the table a comparison lives in: one table per device,
// model, dtype, tp and timing; op keys add the layer (when not the op's usual one), checkpoint
// weights and modelled communication, then the communicator where two would still collide.
std::vector<Dispatch> dispatch(const Table& t) {
  std::vector<Dispatch> out;
  for (const auto& c : t.comparisons) {
    const Key& k = c.key;
    Dispatch d;
    d.table_id =
        k.device + "|" + k.model + "|" + k.dtype + "|" + std::to_string(k.tp) + "|" + k.timing;
    d.op_key = k.op;
    if (!k.layer.empty() && k.layer != default_layer(k.op)) d.op_key += "/" + k.layer;
    if (!k.weights.empty() && k.weights != "random") d.op_key += "/weights:" + k.weights;
    if (c.modelled) d.op_key += "/comm:modelled";
    d.ns = {
        ident(k.device), ident(k.model),
        ident(k.dtype + "_tp" + std::to_string(k.tp) + (k.timing.empty() ? "" : "_" + k.timing))};
    out.push_back(d);
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::map<std::pair<std::string, std::string>, int> count;
    for (const auto& d : out) ++count[{d.table_id, d.op_key}];
    int n = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (count[{out[i].table_id, out[i].op_key}] < 2) continue;
      const Key& k = t.comparisons[i].key;
      // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "lit" + string.
      std::string& key = out[i].op_key;
      if (pass == 0) key.append("/comm:").append(k.comm.empty() ? std::string("none") : k.comm);
      if (pass == 1) key.append("/backend:").append(k.backend);
      if (pass == 2) key.append("#").append(std::to_string(++n));
    }
  }
  // Namespaces: two tables whose names map to one identifier get a number.
  std::map<std::vector<std::string>, std::string> owner;
  std::map<std::string, std::vector<std::string>> by_table;
  for (auto& d : out) {
    if (auto it = by_table.find(d.table_id); it != by_table.end()) {
      d.ns = it->second;
      continue;
    }
    std::vector<std::string> ns = d.ns;
    for (int n = 2; owner.count(ns) && owner[ns] != d.table_id; ++n) {
      ns = d.ns;
      ns.back().append("_").append(std::to_string(n));
    }
    owner[ns] = d.table_id;
    by_table[d.table_id] = ns;
    d.ns = ns;
  }
  return out;
}

// What to run in a range: use: the variant; either: the tied set; unresolved: the default, the
// comparison's baseline variant (the one an engine runs without evidence that another is better).
std::vector<std::string> run_variants(const Comparison& c, const Range& r) {
  if (r.decision != Decision::kUnresolved) return r.variants;
  if (c.baseline.empty()) return {};
  return {c.baseline};
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

nlohmann::json point_json(const Table& t, const Point& p) {
  nlohmann::json j;
  j["tokens"] = p.tokens;
  j["decision"] = to_string(p.decision);
  j["variants"] = p.variants;
  j["label"] = p.label;
  j["reason"] = p.reason;
  if (!p.skipped.empty()) j["skipped"] = p.skipped;
  j["pairs"] = nlohmann::json::array();
  for (const auto& pe : p.pairs) {
    nlohmann::json e;
    e["variant"] = pe.variant;
    e["over"] = pe.over;
    e["state"] = pe.state;
    if (pe.has_interval) {
      e["speedup"] = pe.speedup;
      e["ci_low"] = pe.low;
      e["ci_high"] = pe.high;
      e["pairs"] = pe.pairs;
    }
    if (!pe.note.empty()) e["note"] = pe.note;
    if (!pe.pooling.empty()) e["pooling"] = pe.pooling;
    e["observations"] = nlohmann::json::array();
    for (const auto& o : pe.observations) {
      const Report& r = t.reports[static_cast<std::size_t>(o.report)];
      nlohmann::json ob = {{"report", r.file},           {"git_revision", r.git_revision},
                           {"repetition", o.repetition}, {"entry", o.entry},
                           {"inverted", o.inverted},     {"evidence", o.excluded.empty()}};
      if (o.ratio.speedup > 0) ob["speedup"] = o.ratio.speedup;
      if (o.ratio.low) ob["ci_low"] = *o.ratio.low;
      if (o.ratio.high) ob["ci_high"] = *o.ratio.high;
      if (o.ratio.pairs) ob["pairs"] = *o.ratio.pairs;
      if (!o.excluded.empty()) ob["excluded"] = o.excluded;
      e["observations"].push_back(ob);
    }
    j["pairs"].push_back(e);
  }
  if (p.model) {
    j["cost_model"] = {{"label", p.model->label}, {"seconds", p.model->seconds}};
  }
  return j;
}

// The reports a range rests on: those of its points, or of its two neighbours for a range
// between them.
std::set<int> range_reports(const Comparison& c, const Range& r) {
  std::set<int> out;
  for (const auto& p : c.points) {
    const bool inside = p.tokens >= r.low && p.tokens <= r.high;
    const bool neighbour = r.points.empty() && (p.tokens == r.low - 1 || p.tokens == r.high + 1);
    if (inside || neighbour) out.insert(p.reports.begin(), p.reports.end());
  }
  return out;
}

}  // namespace

nlohmann::json to_json(const Table& t) {
  nlohmann::json j;
  j["schema"] = "fusebench-advice";
  j["version"] = kSchemaVersion;
  j["margin"] = t.margin;
  j["rules"] = {
      {"use", "the variant's 95% interval over every other variant lies wholly above 1 + margin"},
      {"either",
       "a set of variants whose intervals among themselves lie within [1/(1 + margin), 1 + margin] "
       "and each of which beats every other variant"},
      {"unresolved", "anything else: an interval straddling the margin, no interval (fewer than " +
                         std::to_string(kMinIntervalValues) +
                         " pairs), contended or modelled entries; run the default there, the "
                         "comparison's baseline variant (`default`; the range's `variants` and "
                         "choose() give it)"},
      {"pooling",
       "per pair and token count, with 6 or more runs (reports and repetitions): the median of "
       "their speedups and its order-statistic 95% interval (the runs' spread, drift included); "
       "with fewer, the hull of their intervals. Either way the pooled interval lies inside the "
       "hull, so where every run decides alike the pool decides so too. Reports of different "
       "devices are different comparisons; reports of one device with different threads, "
       "libraries or build are refused"},
      {"ranges",
       "between two measured token counts with different decisions, the range ends at the cost "
       "model's crossover when the model agrees with both, else at the measured point (the "
       "tokens between are then an unresolved range, basis \"not measured\")"}};
  j["reports"] = nlohmann::json::array();
  for (const auto& r : t.reports) {
    nlohmann::json rj = {{"file", r.file},
                         {"device", r.device},
                         {"backend", r.backend},
                         {"git_revision", r.git_revision},
                         {"date", r.date}};
    if (!r.skipped.empty()) rj["skipped_entries"] = r.skipped;
    j["reports"].push_back(rj);
  }
  const auto keys = dispatch(t);
  j["comparisons"] = nlohmann::json::array();
  for (std::size_t ci = 0; ci < t.comparisons.size(); ++ci) {
    const Comparison& c = t.comparisons[ci];
    const Key& k = c.key;
    nlohmann::json cj = {{"device", k.device},
                         {"backend", k.backend},
                         {"model", k.model},
                         {"layer", k.layer},
                         {"op", k.op},
                         {"dtype", k.dtype},
                         {"tp", k.tp},
                         {"timing", k.timing},
                         {"weights", k.weights},
                         {"comm", k.comm},
                         {"modelled", c.modelled},
                         {"emulated", c.emulated},
                         {"variants", c.variants},
                         {"baseline", c.baseline},
                         {"default", c.baseline}};
    std::string ns = "fusebench::advice";
    for (const auto& n : keys[ci].ns) ns += "::" + n;
    cj["dispatch"] = {{"op_key", keys[ci].op_key}, {"cpp", ns + "::choose"}};
    cj["cost_model"] = {{"note", c.model_note}, {"launch_overhead_s", c.launch_overhead_s}};
    if (c.ceilings) {
      cj["cost_model"]["ceilings"] = {{"peak_flops", c.ceilings->peak_flops},
                                      {"bandwidth", c.ceilings->bandwidth},
                                      {"source", c.ceilings->source}};
    }
    if (!c.accuracy.empty()) {
      cj["accuracy"] = nlohmann::json::object();
      for (const auto& [v, a] : c.accuracy) {
        nlohmann::json aj = {{"quant_error_max", a.worst},
                             {"quant_error_max_shard", a.worst_shard},
                             {"quant_error_max_tokens", a.worst_tokens},
                             {"less_accurate", a.less_accurate}};
        if (a.vs_split) aj["quant_error_vs_split_max"] = *a.vs_split;
        if (a.growth > 0) {
          aj["growth_over_baseline"] = {{"shard", a.growth_shard},
                                        {"tokens", a.growth_tokens},
                                        {"baseline", a.growth_from},
                                        {"quant_error", a.growth_from + a.growth}};
        }
        const std::string caveat = accuracy_caveat(c, v);
        if (!caveat.empty()) aj["caveat"] = caveat;
        cj["accuracy"][v] = aj;
      }
    }
    cj["reports"] = nlohmann::json::array();
    for (int ri : c.reports) {
      const Report& r = t.reports[static_cast<std::size_t>(ri)];
      cj["reports"].push_back(
          {{"file", r.file}, {"device", r.device}, {"git_revision", r.git_revision}});
    }
    cj["ranges"] = nlohmann::json::array();
    for (const auto& r : c.ranges) {
      nlohmann::json rj = {{"tokens_low", r.low},
                           {"tokens_high", r.high},
                           {"decision", to_string(r.decision)},
                           {"variants", run_variants(c, r)},
                           {"label", r.label},
                           {"basis", r.basis},
                           {"low_end", r.low_end},
                           {"high_end", r.high_end},
                           {"reason", r.reason},
                           {"device", k.device}};
      if (!r.accuracy.empty()) rj["accuracy"] = r.accuracy;
      rj["reports"] = nlohmann::json::array();
      for (int ri : range_reports(c, r)) {
        const Report& rep = t.reports[static_cast<std::size_t>(ri)];
        rj["reports"].push_back(
            {{"file", rep.file}, {"git_revision", rep.git_revision}, {"date", rep.date}});
      }
      rj["evidence"] = nlohmann::json::array();
      for (const auto& p : c.points) {
        if (p.tokens >= r.low && p.tokens <= r.high) rj["evidence"].push_back(point_json(t, p));
      }
      cj["ranges"].push_back(rj);
    }
    j["comparisons"].push_back(cj);
  }
  j["skipped"] = t.skipped;
  if (!t.ep_vs_tp.empty()) j["ep_vs_tp"] = ep_advice_json(t.ep_vs_tp);
  return j;
}

std::string to_markdown(const Table& t) {
  std::ostringstream o;
  o << "# When to fuse: fusebench advice\n\n";
  o << "Decided only where the 95% intervals say so, margin " << fmt(t.margin * 100, "%g")
    << "%: **use: X** where X's interval over every other variant lies above " << fmt(1 + t.margin)
    << "; **either** where the intervals lie within [" << fmt(1 / (1 + t.margin)) << ", "
    << fmt(1 + t.margin)
    << "]; **unresolved** otherwise (an interval across the margin, fewer than "
    << kMinIntervalValues
    << " pairs, contended or modelled entries), where the default runs: the baseline variant, "
       "shown as `unresolved (default: X)`. Several reports of one device and setup are "
    << "pooled (6 or more runs: the median of their speedups and its 95% interval; fewer: the "
       "hull of their intervals); devices are kept apart. Ranges between measured "
       "token "
    << "counts follow the cost model where it agrees with both neighbours, else end at the "
       "measured "
    << "point (docs/advise.md).\n\n";
  o << "Reports:\n\n";
  for (const auto& r : t.reports) {
    o << "- `" << r.file << "`: " << r.device << ", git " << r.git_revision
      << (r.date.empty() ? "" : ", " + r.date) << "\n";
  }
  if (t.comparisons.empty()) o << "\nNo comparison to advise on.\n";
  const auto keys = dispatch(t);
  for (std::size_t ci = 0; ci < t.comparisons.size(); ++ci) {
    const Comparison& c = t.comparisons[ci];
    const Key& k = c.key;
    o << "\n## " << k.op << " · " << k.model;
    if (!k.layer.empty()) o << " · " << k.layer;
    o << " · " << k.dtype << " · tp " << k.tp;
    if (!k.timing.empty()) o << " · " << k.timing;
    if (!k.weights.empty() && k.weights != "random") o << " · weights " << k.weights;
    if (!k.comm.empty()) o << " · comm " << k.comm;
    o << "\n\n";
    o << k.device << (k.backend.empty() ? "" : " (" + k.backend + ")") << "; variants " <<
        [&] {
          std::string s;
          for (const auto& v : c.variants) s += (s.empty() ? "" : ", ") + v;
          return s;
        }()
      << "; git ";
    std::set<std::string> revs;
    for (int ri : c.reports) revs.insert(t.reports[static_cast<std::size_t>(ri)].git_revision);
    std::string rv;
    for (const auto& r : revs) rv += (rv.empty() ? "" : ", ") + r;
    o << rv << "; cost model: " << md_cell(c.model_note) << ".";
    if (c.emulated) {
      o << " **Emulated**: the quantized times are the backend's emulation (codes decoded to fp32, "
           "an fp32 GEMM; docs/quant.md), not native fp8/int8 kernels.";
    }
    if (c.modelled) {
      o << " **Modelled communication**: the collectives are priced by the link model, so no range "
           "is `use:`; the modelled figures are shown as `modelled: ...`.";
    }
    o << "\n\n| tokens | advice | basis | range ends | evidence |\n|---|---|---|---|---|\n";
    for (const auto& r : c.ranges) {
      std::string evidence;
      for (const auto& p : c.points) {
        if (p.tokens < r.low || p.tokens > r.high) continue;
        evidence += (evidence.empty() ? "" : "<br>") + std::to_string(p.tokens) + ": " +
                    (p.label != r.label ? p.label + ": " : "") + p.reason;
        for (const auto& s : p.skipped) evidence += "; skipped " + s;
      }
      if (evidence.empty()) evidence = r.reason;
      std::string advice = r.decision != Decision::kUnresolved ? "**" + r.label + "**"
                           : c.baseline.empty()                ? r.label
                                                : r.label + " (default: " + c.baseline + ")";
      // Faster but less accurate says so, beside the decision (issue 29).
      if (!r.accuracy.empty()) advice += " (" + r.accuracy + ")";
      o << "| " << tokens_span(r.low, r.high) << " | " << md_cell(advice) << " | " << r.basis
        << " | " << md_cell(r.high_end) << " | " << md_cell(evidence) << " |\n";
    }
    if (const std::string acc = accuracy_summary(c); !acc.empty()) {
      o << "\nAccuracy (quant_error: rms error relative to the float64 reference, the worst "
           "shard over the measured token counts): "
        << md_cell(acc) << ".\n";
    }
    o << "\nLookup: `fusebench::advice";
    for (const auto& n : keys[ci].ns) o << "::" << n;
    o << "::choose(\"" << keys[ci].op_key << "\", tokens)`.\n";
  }
  o << ep_advice_markdown(t.ep_vs_tp);
  if (!t.skipped.empty()) {
    o << "\n## Not advised on\n\n";
    for (const auto& s : t.skipped) o << "- " << md_cell(s) << "\n";
  }
  return o.str();
}

std::string to_cpp(const Table& t) {
  std::ostringstream o;
  const auto keys = dispatch(t);
  o << "// Generated by fusebench-advise (docs/advise.md), schema version " << kSchemaVersion
    << ", margin " << fmt(t.margin, "%g") << ". Do not edit: regenerate from the reports.\n";
  for (const auto& r : t.reports) {
    std::string line = r.file + ": " + r.device + ", git " + r.git_revision;
    for (auto& ch : line) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == '\\') ch = '_';  // one comment line
    }
    o << "//   " << line << "\n";
  }
  o << R"(#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace fusebench::advice {

enum class Decision { kUse, kEither, kUnresolved };

// One token range of one op: [tokens_low, tokens_high], inclusive.
struct Range {
  std::string_view op;
  std::int64_t tokens_low;
  std::int64_t tokens_high;
  Decision decision;
  std::string_view variant;  // use: the variant; either: the tied set, comma-separated; else empty
  std::string_view label;    // "use: fused", "either", "unresolved", "modelled: use: paired"
  std::string_view basis;    // "measured", "cost model", "not measured"
  std::string_view default_variant;  // run where unresolved: the comparison's baseline variant
};

struct Choice {
  Decision decision;
  std::string_view variant;
  std::string_view label;
  std::string_view basis;
};

struct TableRef {
  std::string_view device, model, dtype;
  int tp;
  std::string_view timing;
  const Range* ranges;
  std::size_t size;
};

namespace detail {
constexpr Choice lookup(const Range* ranges, std::size_t n, std::string_view op, std::int64_t tokens) {
  const Range* known = nullptr;
  for (std::size_t i = 0; i < n; ++i) {
    if (ranges[i].op != op) continue;
    known = &ranges[i];
    if (tokens >= ranges[i].tokens_low && tokens <= ranges[i].tokens_high) {
      return {ranges[i].decision, ranges[i].variant, ranges[i].label, ranges[i].basis};
    }
  }
  // Unresolved: the op's default (its baseline variant); no default for an op not in the table.
  if (known) return {Decision::kUnresolved, known->default_variant, "unresolved", "outside the measured tokens"};
  return {Decision::kUnresolved, "", "unresolved", "op not in the table"};
}
}  // namespace detail
)";
  // One namespace per table, in first-seen order.
  std::vector<std::string> tables;
  for (const auto& d : keys) {
    if (std::find(tables.begin(), tables.end(), d.table_id) == tables.end())
      tables.push_back(d.table_id);
  }
  std::vector<std::string> refs;
  for (const auto& id : tables) {
    std::vector<std::string> ns;
    const Key* key = nullptr;
    std::ostringstream rows;
    std::size_t n = 0;
    for (std::size_t ci = 0; ci < t.comparisons.size(); ++ci) {
      if (keys[ci].table_id != id) continue;
      ns = keys[ci].ns;
      key = &t.comparisons[ci].key;
      for (const auto& r : t.comparisons[ci].ranges) {
        const std::string variant = joined(run_variants(t.comparisons[ci], r));
        const char* dec = r.decision == Decision::kUse      ? "Decision::kUse"
                          : r.decision == Decision::kEither ? "Decision::kEither"
                                                            : "Decision::kUnresolved";
        rows << "    {" << cpp_str(keys[ci].op_key) << ", " << r.low << ", " << r.high << ", "
             << dec << ", " << cpp_str(variant) << ", " << cpp_str(r.label) << ", "
             << cpp_str(r.basis) << ", " << cpp_str(t.comparisons[ci].baseline) << "},\n";
        ++n;
      }
    }
    std::string path;
    for (const auto& s : ns) path += (path.empty() ? "" : "::") + s;
    o << "\n// " << key->device << ", " << key->model << ", " << key->dtype << ", tp " << key->tp
      << (key->timing.empty() ? "" : ", timing " + key->timing) << "\n";
    o << "namespace " << path << " {\ninline constexpr Range kRanges[] = {\n"
      << rows.str() << "};\n";
    o << "inline constexpr std::size_t kSize = " << n << ";\n";
    o << "constexpr Choice choose(std::string_view op, std::int64_t tokens) {\n"
      << "  return detail::lookup(kRanges, kSize, op, tokens);\n}\n";
    o << "}  // namespace " << path << "\n";
    refs.push_back("    {" + cpp_str(key->device) + ", " + cpp_str(key->model) + ", " +
                   cpp_str(key->dtype) + ", " + std::to_string(key->tp) + ", " +
                   cpp_str(key->timing) + ", " + path + "::kRanges, " + path + "::kSize},\n");
  }
  o << "\n// Every table, for a lookup by device, model, dtype, tp and timing.\n"
    << "inline constexpr std::size_t kTableCount = " << refs.size() << ";\n";
  if (refs.empty()) {
    o << "inline constexpr const TableRef* kTables = nullptr;\n";
  } else {
    o << "inline constexpr TableRef kTables[] = {\n";
    for (const auto& r : refs) o << r;
    o << "};\n";
  }
  o << R"(
constexpr const TableRef* find_table(std::string_view device, std::string_view model,
                                     std::string_view dtype, int tp, std::string_view timing) {
  for (std::size_t i = 0; i < kTableCount; ++i) {
    const TableRef& t = kTables[i];
    if (t.device == device && t.model == model && t.dtype == dtype && t.tp == tp && t.timing == timing) {
      return &t;
    }
  }
  return nullptr;
}

constexpr Choice choose(std::string_view device, std::string_view model, std::string_view dtype, int tp,
                        std::string_view timing, std::string_view op, std::int64_t tokens) {
  const TableRef* t = find_table(device, model, dtype, tp, timing);
  if (t == nullptr) return {Decision::kUnresolved, "", "unresolved", "no table for this configuration"};
  return detail::lookup(t->ranges, t->size, op, tokens);
}

}  // namespace fusebench::advice
)";
  return o.str();
}

std::string to_python(const Table& t) {
  std::ostringstream o;
  const auto keys = dispatch(t);
  o << "\"\"\"Generated by fusebench-advise (docs/advise.md), schema version " << kSchemaVersion
    << ", margin " << fmt(t.margin, "%g") << ". Do not edit: regenerate from the reports.\n\n";
  for (const auto& r : t.reports) {
    std::string line = r.file + ": " + r.device + ", git " + r.git_revision;
    for (auto& ch : line) {
      if (ch == '"' || ch == '\\') ch = '_';
    }
    o << "  " << line << "\n";
  }
  o << R"(
choose(op, tokens, device=None, model=None, dtype=None, tp=None, timing=None) returns a Choice
(decision: "use" | "either" | "unresolved", variant, label, basis) from the one table the given
selectors leave (LookupError when none or several are left). Where unresolved, variant is the
default to run: the comparison's baseline variant ("" for an op not in the table).
"""
from collections import namedtuple

SCHEMA_VERSION = )"
    << kSchemaVersion << "\nMARGIN = " << fmt(t.margin, "%.15g") << R"(
Choice = namedtuple("Choice", "decision variant label basis")

# Each table: its configuration; per op key, the ranges (tokens_low, tokens_high, decision,
# variant, label, basis), inclusive and in increasing order; per op key, the default (the
# baseline variant) run where unresolved.
TABLES = [
)";
  std::vector<std::string> tables;
  for (const auto& d : keys) {
    if (std::find(tables.begin(), tables.end(), d.table_id) == tables.end())
      tables.push_back(d.table_id);
  }
  for (const auto& id : tables) {
    const Key* key = nullptr;
    std::map<std::string, std::vector<std::string>> ops;
    std::map<std::string, std::string> defaults;  // op key -> its default where unresolved
    std::vector<std::string> order;
    for (std::size_t ci = 0; ci < t.comparisons.size(); ++ci) {
      if (keys[ci].table_id != id) continue;
      key = &t.comparisons[ci].key;
      if (!ops.count(keys[ci].op_key)) order.push_back(keys[ci].op_key);
      defaults[keys[ci].op_key] = t.comparisons[ci].baseline;
      for (const auto& r : t.comparisons[ci].ranges) {
        const std::string variant = joined(run_variants(t.comparisons[ci], r));
        std::string row = "(";  // built by appending: GCC 12 -Wrestrict false positive on "(" + ...
        row.append(std::to_string(r.low)).append(", ").append(std::to_string(r.high));
        for (const std::string& f :
             {py_str(to_string(r.decision)), py_str(variant), py_str(r.label), py_str(r.basis)}) {
          row.append(", ").append(f);
        }
        ops[keys[ci].op_key].push_back(row + ")");
      }
    }
    o << "    {\n        \"device\": " << py_str(key->device)
      << ",\n        \"model\": " << py_str(key->model)
      << ",\n        \"dtype\": " << py_str(key->dtype) << ",\n        \"tp\": " << key->tp
      << ",\n        \"timing\": " << py_str(key->timing) << ",\n        \"ops\": {\n";
    for (const auto& op : order) {
      o << "            " << py_str(op) << ": [\n";
      for (const auto& row : ops[op]) o << "                " << row << ",\n";
      o << "            ],\n";
    }
    o << "        },\n        \"defaults\": {\n";
    for (const auto& op : order)
      o << "            " << py_str(op) << ": " << py_str(defaults[op]) << ",\n";
    o << "        },\n    },\n";
  }
  o << R"(]


def tables(device=None, model=None, dtype=None, tp=None, timing=None):
    """The tables matching every selector given."""
    sel = {"device": device, "model": model, "dtype": dtype, "tp": tp, "timing": timing}
    return [t for t in TABLES if all(v is None or t[k] == v for k, v in sel.items())]


def choose(op, tokens, device=None, model=None, dtype=None, tp=None, timing=None):
    found = tables(device, model, dtype, tp, timing)
    if len(found) != 1:
        what = ", ".join(f"{t['device']} {t['model']} {t['dtype']} tp{t['tp']} {t['timing']}" for t in TABLES)
        raise LookupError(f"{len(found)} tables match (device={device!r}, model={model!r}, dtype={dtype!r}, "
                          f"tp={tp!r}, timing={timing!r}); tables: {what or 'none'}")
    ranges = found[0]["ops"].get(op)
    if ranges is None:
        return Choice("unresolved", "", "unresolved", "op not in the table")
    for lo, hi, decision, variant, label, basis in ranges:
        if lo <= tokens <= hi:
            return Choice(decision, variant, label, basis)
    return Choice("unresolved", found[0]["defaults"][op], "unresolved", "outside the measured tokens")
)";
  return o.str();
}

}  // namespace fusebench::advise
