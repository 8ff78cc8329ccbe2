// A report's machine and build identity, field by field (include/fusebench/identity.hpp).
#include "fusebench/identity.hpp"

#include "fusebench/advise.hpp"

namespace fusebench::advise {
namespace {

// The value at a dotted path of the context, as text ("" when absent or not a scalar).
std::string at_path(const nlohmann::json& ctx, const std::string& path) {
  const nlohmann::json* v = &ctx;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t dot = std::min(path.find('.', start), path.size());
    if (!v->is_object()) return "";
    const auto it = v->find(path.substr(start, dot - start));
    if (it == v->end()) return "";
    v = &*it;
    start = dot + 1;
  }
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number() || v->is_boolean()) return v->dump();
  return "";
}

// Which backend a field changes timing on: "" any, else "cuda" or "cpu".
struct Spec {
  const char* name;
  const char* path;
  const char* timing_on;  // nullptr: shown only
};

const Spec kSpecs[] = {
    {"backend", "backend", ""},
    {"device", "", ""},  // gpu_name or cpu_model: device_identity
    {"cores", "num_cpus", "cpu"},
    {"threads", "cpu_threads.threads", nullptr},  // the gate's thread rule: NOT JUDGED
    {"driver", "cuda_driver_version", "cuda"},
    {"cuda", "cuda_runtime_version", "cuda"},
    {"cublas", "libraries.cublaslt", "cuda"},
    {"nccl", "libraries.nccl", "cuda"},
    {"onednn", "cpu_gemm.onednn.version", "cpu"},
    {"openblas", "cpu_gemm.openblas.config", "cpu"},
    {"build_type", "fusebench_build_type", ""},
    {"suite_version", "fusebench_version", nullptr},
    {"naming_version", "entry_naming_version", nullptr},
    {"git_revision", "git_revision", nullptr},
    {"date", "date", nullptr},
    {"host", "host_name", nullptr},
};

}  // namespace

std::vector<IdentityField> compare_identity(const nlohmann::json& baseline,
                                            const nlohmann::json& current) {
  const std::string backend = at_path(baseline, "backend");
  std::vector<IdentityField> out;
  for (const Spec& s : kSpecs) {
    IdentityField f;
    f.name = s.name;
    if (f.name == "device") {
      f.source = "context.gpu_name / context.cpu_model";
      f.baseline = device_identity(baseline);
      f.current = device_identity(current);
    } else {
      f.source = std::string("context.") + s.path;
      f.baseline = at_path(baseline, s.path);
      f.current = at_path(current, s.path);
    }
    f.timing = s.timing_on != nullptr && (*s.timing_on == '\0' || backend == s.timing_on);
    out.push_back(f);
  }
  return out;
}

const std::vector<std::string>& timing_identity_fields() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const Spec& s : kSpecs) {
      if (s.timing_on != nullptr) v.push_back(s.name);
    }
    return v;
  }();
  return names;
}

}  // namespace fusebench::advise
