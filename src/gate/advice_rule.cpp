// The gate's advice rule (docs/gate.md): the dispatch tables of the two reports, built by the
// advisor's own code, compared at every token count both measured. `use: X` that became
// `use: Y` fails (an engine would now run the other variant); a change to or from `either` or
// `unresolved` is reported.
#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"

namespace fusebench::gate {
namespace {

// A comparison apart from its device (the gate refuses or allows a device mismatch on its own).
std::string without_device(const advise::Key& k) {
  advise::Key copy = k;
  copy.device.clear();
  std::string s = copy.text();
  const auto on = s.rfind(" on ");
  return on == std::string::npos ? s : s.substr(0, on);
}

}  // namespace

void compare_advice(const advise::Table& baseline, const advise::Table& current, Result& r) {
  // Matched on every axis but the device (the name shown leaves the backend out too).
  std::map<std::string, const advise::Comparison*> base;
  for (const auto& c : baseline.comparisons) base[without_device(c.key) + "|" + c.key.backend] = &c;
  for (const auto& cur : current.comparisons) {
    const std::string name = without_device(cur.key);
    const auto it = base.find(name + "|" + cur.key.backend);
    if (it == base.end()) continue;
    ++r.advice.comparisons;
    // Runs of consecutive common token counts with the same change form one finding.
    struct Run {
      std::int64_t low = 0, high = 0;
      std::string from, to;
      bool flip = false;
    };
    std::vector<Run> runs;
    bool last_common = false;
    for (const auto& p : cur.points) {
      const advise::Point* b = it->second->point(p.tokens);
      if (!b) {
        last_common = false;
        continue;
      }
      ++r.advice.points;
      if (b->label == p.label) {
        last_common = false;
        continue;
      }
      const bool flip = b->decision == advise::Decision::kUse &&
                        p.decision == advise::Decision::kUse && b->variants != p.variants;
      if (last_common && !runs.empty() && runs.back().from == b->label &&
          runs.back().to == p.label) {
        runs.back().high = p.tokens;
      } else {
        runs.push_back({p.tokens, p.tokens, b->label, p.label, flip});
      }
      last_common = true;
    }
    for (const auto& run : runs) {
      const std::string tokens = run.low == run.high ? "tokens " + std::to_string(run.low)
                                                     : "tokens " + std::to_string(run.low) + "-" +
                                                           std::to_string(run.high);
      if (run.flip) {
        ++r.advice.flipped;
      } else {
        ++r.advice.changed;
      }
      r.findings.push_back(
          {run.flip ? Status::kFlipped : Status::kNote, name, "advice", std::nullopt, std::nullopt,
           tokens + ": " + run.from + " -> " + run.to +
               (run.flip ? " (the decision flipped)" : " (reported, not failed)")});
    }
  }
  // Both reports hold comparisons and none matched: the rule compared nothing, which is no pass
  // (issue 37: every entry's dtype changed under its name, and the gate passed).
  if (r.advice.comparisons == 0 && !baseline.comparisons.empty() && !current.comparisons.empty()) {
    r.unjudged.push_back(
        "advice rule: none of the baseline's " + std::to_string(baseline.comparisons.size()) +
        " comparison(s) is in the current report (their op, model, layer, dtype, tp or backend "
        "differ), so nothing was compared, e.g. " +
        without_device(baseline.comparisons[0].key));
  }
}

std::string advice_rule_summary(const Result& r) {
  if (!r.advice.off.empty()) return "not applied: " + r.advice.off + ".";
  return std::to_string(r.advice.points) + " token count(s) of " +
         std::to_string(r.advice.comparisons) +
         " comparison(s) measured in both: " + std::to_string(r.advice.flipped) + " flipped, " +
         std::to_string(r.advice.changed) + " other change(s).";
}

}  // namespace fusebench::gate
