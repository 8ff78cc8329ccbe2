// The gate's identity and naming rules (docs/gate.md, "Identity" and "Entry names"): reports of
// different machines or builds are refused naming the field; names that vanished are explained.
#include <map>

#include "fusebench/advise.hpp"
#include "fusebench/gate.hpp"

namespace fusebench::gate {
namespace {

std::string shown(const std::string& v) { return v.empty() ? "not recorded" : "\"" + v + "\""; }

}  // namespace

std::vector<advise::IdentityField> check_identity(const Report& baseline, const Report& current,
                                                  const Options& o) {
  auto fields = advise::compare_identity(baseline.context, current.context);
  for (const auto& f : fields) {
    if (!f.timing || !f.differs() || o.allow_identity.count(f.name)) continue;
    if (o.allow_device_mismatch && (f.name == "device" || f.name == "backend")) continue;
    const std::string flag = f.name == "device" || f.name == "backend"
                                 ? "--allow-device-mismatch"
                                 : "--allow-identity-mismatch=" + f.name;
    throw InputError(f.name + " mismatch: " + baseline.file + " (" + f.source +
                     ") was measured with " + shown(f.baseline) + ", " + current.file + " with " +
                     shown(f.current) +
                     "; this changes timing, so the reports are not compared: compare reports "
                     "of one machine and build, or pass " +
                     flag);
  }
  return fields;
}

std::string rename_hint(const std::string& missing, const Report& baseline, const Report& current) {
  const auto want = advise::name_segments(missing);
  std::vector<std::string> found;
  for (const Entry& e : current.entries) {
    if (baseline.find(e.name)) continue;  // not new: not a rename
    const auto have = advise::name_segments(e.name);
    bool same = true;
    for (const char* key : {"op", "variant", "model", "tokens", "dtype", "tp"}) {
      const auto a = want.find(key), b = have.find(key);
      same = same && (a == want.end()) == (b == have.end()) &&
             (a == want.end() || a->second == b->second);
    }
    if (same) found.push_back(e.name);
  }
  if (found.size() != 1) return "";
  return " (renamed? the current report has " + found.front() +
         ": the same op, variant, model, tokens, dtype and tp)";
}

std::vector<std::string> naming_hints(const Report& baseline, const Report& current,
                                      const Result& r) {
  int missing = 0, added = 0;
  for (const auto& f : r.findings) {
    missing += f.status == Status::kMissing && f.metric.empty();
    added += f.status == Status::kNew || f.status == Status::kUncovered;
  }
  if (missing == 0 || added == 0) return {};
  const auto fields = advise::compare_identity(baseline.context, current.context);
  auto field = [&](const char* name) {
    for (const auto& f : fields) {
      if (f.name == name) return f;
    }
    return advise::IdentityField{};
  };
  const auto naming = field("naming_version"), suite = field("suite_version");
  std::string why = std::to_string(missing) + " entr" + (missing == 1 ? "y" : "ies") +
                    " MISSING and " + std::to_string(added) + " NEW: ";
  if (naming.baseline != naming.current) {
    why += "the reports' entry naming versions differ (context.entry_naming_version: baseline " +
           (naming.baseline.empty() ? "not recorded, older than version 1" : naming.baseline) +
           ", current " + (naming.current.empty() ? "not recorded" : naming.current) +
           "): entry names changed between suite versions; ";
  } else {
    why += "the names differ although the naming versions agree (" +
           (naming.baseline.empty() ? std::string("neither report records one") : naming.baseline) +
           "): the sweeps measured different entries; ";
  }
  why += "suite versions: baseline " + (suite.baseline.empty() ? "not recorded" : suite.baseline) +
         ", current " + (suite.current.empty() ? "not recorded" : suite.current) +
         ". A rename is named on its MISSING row; make a baseline with this suite "
         "(scripts/update-baseline.sh)";
  return {why};
}

}  // namespace fusebench::gate
