// TP or EP (ep_advice.hpp): per tp_moe comparison and token count, the fastest of tp and the
// expert-parallel variants, measured where the advisor decided it, else the cost model's.
#include "fusebench/ep_advice.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace fusebench::advise {
namespace {

std::string seconds_text(double s) {
  char buf[48];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.3g us", s * 1e6);
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g ms", s * 1e3);
  }
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// "tp" for the tensor-parallel variant, "ep" for the expert-parallel ones, "either" for a set
// holding both.
std::string side_of(const std::vector<std::string>& variants) {
  bool tp = false, ep = false;
  for (const auto& v : variants) (v == "tp" ? tp : ep) = true;
  return tp && ep ? "either" : tp ? "tp" : ep ? "ep" : "";
}

// tokens -> variant -> the cost model's pipeline seconds (the first entry that has one).
using Predictions = std::map<std::int64_t, std::map<std::string, double>>;

std::map<Key, Predictions> predictions(const std::vector<Report>& reports) {
  std::map<Key, Predictions> out;
  for (const auto& r : reports) {
    for (const auto& e : r.entries) {
      if (e.op != "tp_moe" || e.tp < 2) continue;
      const Key k{r.device, e.backend, e.model,   e.layer, e.op,
                  e.dtype,  e.timing,  e.weights, e.comm,  e.tp};
      auto& at = out[k][e.tokens];
      if (!e.header.error && e.predicted_pipeline_seconds && !at.count(e.variant))
        at[e.variant] = *e.predicted_pipeline_seconds;
    }
  }
  return out;
}

// The EP variants the measurement puts ahead of tp (each pair's interval above the margin),
// when no single fastest variant was decided: the side is measured even where the EP variants
// tie among themselves. Empty unless at least one EP variant beats tp.
std::vector<std::string> ep_variants_beating_tp(const Point& measured) {
  std::vector<std::string> out;
  for (const auto& pair : measured.pairs) {
    if (pair.variant != "tp" && pair.over == "tp" && pair.state == "beats")
      out.push_back(pair.variant);
    if (pair.variant == "tp" && pair.over != "tp" && pair.state == "loses")
      out.push_back(pair.over);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The measured decision where the comparison has one, else the prediction's fastest.
EpPoint decide(std::int64_t tokens, const Point* measured, bool comparison_modelled,
               const std::map<std::string, double>& predicted) {
  EpPoint p;
  p.tokens = tokens;
  p.predicted_seconds = predicted;
  std::string why_not = "no paired measurement of the variants";
  if (measured && !comparison_modelled &&
      (measured->decision == Decision::kUse || measured->decision == Decision::kEither)) {
    p.fastest = measured->variants;
    p.basis = "measured";
    p.label = "measured: " +
              (p.fastest.size() == 1 ? p.fastest.front() : "either " + join(p.fastest, ", "));
    p.reason = measured->reason;
  } else if (const auto ahead = measured && !comparison_modelled ? ep_variants_beating_tp(*measured)
                                                                 : std::vector<std::string>{};
             !ahead.empty()) {
    p.fastest = ahead;
    p.basis = "measured";
    p.label = "measured: EP (" + join(ahead, ", ") + " over tp)";
    p.reason = join(ahead, ", ") +
               " beat tp beyond the margin; which EP variant is fastest the measurement leaves " +
               measured->label + " (" + measured->reason + ")";
  } else {
    if (measured) {
      why_not = comparison_modelled ? "modelled communication is no measurement"
                                    : "measured " + measured->label + " (" + measured->reason + ")";
    }
    if (predicted.size() >= 2) {
      const auto best =
          std::min_element(predicted.begin(), predicted.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      p.fastest = {best->first};
      p.basis = "modelled";
      p.label = "modelled: " + best->first;
      std::vector<std::string> times;
      for (const auto& [v, s] : predicted) times.push_back(v + " " + seconds_text(s));
      p.reason = why_not +
                 "; the cost model's pipeline (moe_ranks.predicted: the slowest rank's roofline "
                 "compute plus the collectives on its link profile): " +
                 join(times, ", ");
    } else {
      p.basis = "none";
      p.label = "unresolved";
      p.reason = why_not + "; no cost-model prediction for two or more variants";
    }
  }
  p.side = side_of(p.fastest);
  return p;
}

// Where the decided side (tp or ep) changes between neighbouring decided points.
std::vector<EpCrossover> crossovers(const std::vector<EpPoint>& points) {
  std::vector<EpCrossover> out;
  const EpPoint* last = nullptr;
  for (const auto& p : points) {
    if (p.side != "tp" && p.side != "ep") continue;
    if (last && last->side != p.side) {
      const std::string basis =
          last->basis == p.basis ? p.basis : std::string("measured and modelled");
      out.push_back({last->tokens, p.tokens, last->label, p.label, basis});
    }
    last = &p;
  }
  return out;
}

std::string summary_of(const EpAdvice& a) {
  std::set<std::string> sides;
  std::int64_t lo = 0, hi = 0;
  for (const auto& p : a.points) {
    if (p.side != "tp" && p.side != "ep") continue;
    sides.insert(p.side);
    if (lo == 0) lo = p.tokens;
    hi = p.tokens;
  }
  if (sides.empty()) return "no token count decided: neither measured nor modelled";
  const std::string span = std::to_string(lo) + "-" + std::to_string(hi) + " tokens";
  if (a.crossovers.empty()) {
    return (*sides.begin() == "tp" ? "TP" : "EP") +
           std::string(" fastest at every decided count (") + span + ")";
  }
  std::string out;
  for (const auto& c : a.crossovers) {
    const bool to_ep =
        c.to.find(": ep_") != std::string::npos || c.to.find(": EP") != std::string::npos;
    out += (out.empty() ? "" : "; ") + std::string(to_ep ? "EP beats TP" : "TP beats EP") +
           " from " + std::to_string(c.at) + " tokens (" + c.to + "; " + c.from + " at " +
           std::to_string(c.below) + "; " + c.basis + ")";
  }
  return out;
}

nlohmann::json key_json(const Key& k) {
  return {{"device", k.device},   {"backend", k.backend}, {"model", k.model}, {"layer", k.layer},
          {"op", k.op},           {"dtype", k.dtype},     {"tp", k.tp},       {"timing", k.timing},
          {"weights", k.weights}, {"comm", k.comm}};
}

}  // namespace

std::vector<EpAdvice> ep_advice(const std::vector<Report>& reports,
                                const std::vector<Comparison>& comparisons) {
  std::vector<EpAdvice> out;
  for (const auto& [key, by_tokens] : predictions(reports)) {
    const Key& wanted = key;  // clang 14 captures no structured binding
    const auto c = std::find_if(comparisons.begin(), comparisons.end(),
                                [&](const Comparison& x) { return x.key == wanted; });
    EpAdvice a;
    a.key = key;
    for (const auto& [tokens, predicted] : by_tokens) {
      const Point* measured = c != comparisons.end() ? c->point(tokens) : nullptr;
      a.points.push_back(
          decide(tokens, measured, c != comparisons.end() && c->modelled, predicted));
    }
    a.crossovers = crossovers(a.points);
    a.summary = summary_of(a);
    out.push_back(std::move(a));
  }
  return out;
}

nlohmann::json ep_advice_json(const std::vector<EpAdvice>& advice) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& a : advice) {
    nlohmann::json j = key_json(a.key);
    j["summary"] = a.summary;
    j["points"] = nlohmann::json::array();
    for (const auto& p : a.points) {
      j["points"].push_back({{"tokens", p.tokens},
                             {"fastest", p.fastest},
                             {"side", p.side},
                             {"basis", p.basis},
                             {"label", p.label},
                             {"reason", p.reason},
                             {"predicted_seconds", p.predicted_seconds}});
    }
    j["crossovers"] = nlohmann::json::array();
    for (const auto& c : a.crossovers) {
      j["crossovers"].push_back({{"tokens_below", c.below},
                                 {"tokens_at", c.at},
                                 {"from", c.from},
                                 {"to", c.to},
                                 {"basis", c.basis}});
    }
    out.push_back(std::move(j));
  }
  return out;
}

std::string ep_advice_markdown(const std::vector<EpAdvice>& advice) {
  if (advice.empty()) return "";
  std::ostringstream o;
  o << "\n## TP or EP (tp_moe)\n\n"
    << "Per token count the fastest of tp and the expert-parallel variants: `measured:` where "
       "the comparison above decided it (95% intervals, judged entries), else `modelled:` from "
       "the cost model's prediction each entry carries (moe_ranks.predicted; docs/tp.md).\n";
  for (const auto& a : advice) {
    const Key& k = a.key;
    o << "\n### " << k.model << " · " << k.dtype << " · tp " << k.tp;
    if (!k.comm.empty()) o << " · comm " << k.comm;
    if (!k.timing.empty()) o << " · " << k.timing;
    o << "\n\n"
      << k.device << ": " << a.summary << ".\n\n| tokens | fastest | side | why |\n"
      << "|---|---|---|---|\n";
    for (const auto& p : a.points) {
      std::string why = p.reason;
      for (auto& ch : why)
        if (ch == '|' || ch == '\n') ch = ' ';
      o << "| " << p.tokens << " | " << p.label << " | " << (p.side.empty() ? "-" : p.side) << " | "
        << why << " |\n";
    }
  }
  return o.str();
}

}  // namespace fusebench::advise
