// The gate's verdict (docs/gate.md, "Verdicts"): FAIL when a rule found a regression, else NOT
// JUDGED when anything was not judged, else PASS; each with its own exit code.
#include "fusebench/gate.hpp"

namespace fusebench::gate {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "PASS";
    case Verdict::kFail:
      return "FAIL";
    case Verdict::kNotJudged:
      return "NOT JUDGED";
  }
  return "?";
}

Verdict Result::verdict() const {
  if (failed()) return Verdict::kFail;
  return unjudged.empty() ? Verdict::kPass : Verdict::kNotJudged;
}

int Result::exit_code() const {
  switch (verdict()) {
    case Verdict::kPass:
      return kExitPass;
    case Verdict::kFail:
      return kExitFail;
    case Verdict::kNotJudged:
      return allow_unjudged ? kExitPass : kExitNotJudged;
  }
  return kExitUnusable;
}

std::string Result::verdict_text() const {
  const Verdict v = verdict();
  if (v != Verdict::kNotJudged) return to_string(v);
  std::string s = "NOT JUDGED (";
  for (std::size_t i = 0; i < unjudged.size(); ++i) s += (i ? "; " : "") + unjudged[i];
  return s + (allow_unjudged ? ") - passed by --allow-unjudged"
                             : ") - exit 3; --allow-unjudged lets it pass");
}

Result no_baseline_result(const std::string& baseline_path, const Report& current,
                          const Options& o) {
  Result r;
  r.current_device = device_identity(current);
  r.baseline_device = "none";
  r.allow_unjudged = o.allow_unjudged;
  r.timing_off = "no baseline";
  r.speedup.off = r.advice.off = "no baseline";
  r.unjudged.push_back("no baseline at " + baseline_path +
                       " (make one with scripts/update-baseline.sh on this device; "
                       "--require-baseline makes this an error)");
  return r;
}

}  // namespace fusebench::gate
