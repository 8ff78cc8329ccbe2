// The gate's accuracy rule and the identity of entries beyond their names (docs/gate.md, "The
// accuracy rule", "Identity of entries"): a quantized entry whose error grew fails as a slower
// one does; an entry whose routing or quant spec differs is another experiment and is refused.
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fusebench/gate.hpp"

namespace fusebench::gate {
namespace {

std::string plain_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", 100.0 * fraction);
  return buf;
}

std::string value_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// The group --allow-identity-mismatch names for a setup field.
std::string group_of(const std::string& field) {
  return field.rfind("moe.routing.", 0) == 0 ? "routing" : "quant";
}

}  // namespace

const std::vector<std::string>& entry_setup_groups() {
  static const std::vector<std::string> groups = {"routing", "quant"};
  return groups;
}

void check_entry_setup(const Entry& base, const Entry& cur, const Report& baseline,
                       const Report& current, const Options& o, Result& r) {
  // Fields either side records; one that only one side records is an older report (noted).
  std::map<std::string, std::pair<std::string, std::string>> fields;
  for (const auto& [k, v] : base.fields.setup) fields[k].first = v;
  for (const auto& [k, v] : cur.fields.setup) fields[k].second = v;
  for (const auto& [field, values] : fields) {
    const auto& [b, c] = values;
    if (b == c) continue;
    if (b.empty() || c.empty()) {
      r.findings.push_back({Status::kNote, base.name, field, std::nullopt, std::nullopt,
                            std::string("recorded by the ") + (b.empty() ? "current" : "baseline") +
                                " report only: not compared"});
      continue;
    }
    const std::string group = group_of(field);
    if (o.allow_identity.count(group)) {
      r.findings.push_back({Status::kNote, base.name, field, std::nullopt, std::nullopt,
                            "differs: baseline " + b + ", current " + c +
                                " (allowed by --allow-identity-mismatch=" + group + ")"});
      continue;
    }
    throw InputError(base.name + ": " + field + " differs: " + baseline.file + " has " + b + ", " +
                     current.file + " has " + c + "; the " +
                     (group == "routing" ? std::string("routing decides each expert's rows")
                      : field == "dtype" ? std::string("dtype decides the kernels")
                                         : std::string("quantized dtype decides the kernels")) +
                     ", so the entries are not compared: measure both with the same " +
                     (group == "routing" ? "--routing and --seed" : "--dtypes") +
                     ", or pass --allow-identity-mismatch=" + group);
  }
}

void compare_accuracy(const Entry& base, const Entry& cur, const Options& o, Result& r) {
  r.accuracy.threshold = o.quant_error_threshold;
  if (base.fields.accuracy.empty()) {
    if (!cur.fields.accuracy.empty())
      r.findings.push_back({Status::kNote, base.name, "quant_error", std::nullopt, std::nullopt,
                            "new in current (the baseline entry has no accuracy fields)"});
    return;
  }
  ++r.accuracy.entries;
  for (const auto& [field, shards] : base.fields.accuracy) {
    const auto cur_field = cur.fields.accuracy.find(field);
    for (const auto& [shard, bv] : shards) {
      const std::string metric = field + "." + shard;
      const std::map<std::string, double>* cs =
          cur_field == cur.fields.accuracy.end() ? nullptr : &cur_field->second;
      const auto it = cs ? cs->find(shard) : std::map<std::string, double>::const_iterator{};
      if (!cs || it == cs->end()) {
        // An accuracy that is no longer measured could hide a regression, as a counter could.
        r.findings.push_back(
            {o.allow_missing_counters ? Status::kNote : Status::kMissing, base.name, metric, bv,
             std::nullopt,
             "accuracy absent from current" +
                 std::string(o.allow_missing_counters ? " (--allow-missing-counters)" : "")});
        continue;
      }
      ++r.accuracy.values;
      const double cv = it->second, growth = cv - bv;
      // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on "+" + std::string(...).
      std::string change = "from 0";
      if (bv > 0) change = std::string(growth >= 0 ? "+" : "").append(plain_percent(growth / bv));
      const std::string rule = "threshold " + plain_percent(o.quant_error_threshold) + " and +" +
                               value_text(kQuantErrorFloor) + " (--quant-error-threshold)";
      if (growth > o.quant_error_threshold * bv && growth > kQuantErrorFloor) {
        ++r.accuracy.grew;
        r.findings.push_back({Status::kLessAccurate, base.name, metric, bv, cv,
                              change + ": the " + field + " of shard " + shard +
                                  " grew beyond the " + rule + " (less accurate)"});
      } else if (-growth > o.quant_error_threshold * bv && -growth > kQuantErrorFloor) {
        r.findings.push_back({Status::kNote, base.name, metric, bv, cv,
                              change + ": more accurate (reported, not failed)"});
      } else {
        r.findings.push_back(
            {Status::kPass, base.name, metric, bv, cv, change + " (" + rule + ")"});
      }
    }
  }
}

std::string accuracy_rule_summary(const Result& r) {
  if (r.accuracy.entries == 0)
    return "not applied: no baseline entry has quant_error (no quantized entries).";
  return "applied to " + std::to_string(r.accuracy.entries) + " entr" +
         (r.accuracy.entries == 1 ? "y" : "ies") + " (" + std::to_string(r.accuracy.values) +
         " shard values), " + std::to_string(r.accuracy.grew) + " grew; threshold " +
         plain_percent(r.accuracy.threshold) + " of the baseline's error and +" +
         value_text(kQuantErrorFloor) + " (--quant-error-threshold sets it).";
}

}  // namespace fusebench::gate
