#pragma once
// What machine and build a report was measured on, compared field by field for the gate and the
// advisor (docs/gate.md, "Identity"): a field whose difference changes timing refuses the
// comparison (the gate) or the pooling (the advisor) unless allowed; the others are shown.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fusebench::advise {

// The naming version of entry names this build writes (context.entry_naming_version): bumped
// whenever an entry's name changes, so a gate across versions can say why names are missing.
inline constexpr int kEntryNamingVersion = 1;

struct IdentityField {
  std::string name;    // "backend", "device", "cores", "driver", ... (--allow-identity-mismatch)
  std::string source;  // where it is read: "context.num_cpus"
  std::string baseline, current;  // as recorded; "" when the report does not record it
  bool timing = false;            // a difference changes timing on this backend
  bool recorded() const { return !baseline.empty() && !current.empty(); }
  bool differs() const { return recorded() && baseline != current; }
};

// Every field, in a fixed order (backend, device, cores, threads, driver, cuda, cublas, nccl,
// onednn, openblas, build_type, suite_version, naming_version, git_revision, date, host).
std::vector<IdentityField> compare_identity(const nlohmann::json& baseline,
                                            const nlohmann::json& current);

// The names --allow-identity-mismatch accepts (the timing fields, threads excluded).
const std::vector<std::string>& timing_identity_fields();

}  // namespace fusebench::advise
