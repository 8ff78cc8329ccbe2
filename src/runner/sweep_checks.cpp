#include "sweep_checks.hpp"

#include <algorithm>
#include <stdexcept>

#include "fusebench/ops.hpp"

namespace fusebench::bench {
namespace {

bool has(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string joined(const std::vector<std::string>& list) {
  std::string out;
  for (const auto& v : list) out += (out.empty() ? "" : ", ") + v;
  return out;
}

}  // namespace

void check_variants_exist(const std::vector<std::string>& variants,
                          const std::vector<std::string>& ops) {
  std::vector<std::string> selected;  // the variants of the selected ops
  for (const auto& op : ops) {
    const OpInfo& info = find_op(op);
    std::vector<std::string> all = info.variants;
    if (info.quant_variants) {  // per-tensor scales have every quantized variant
      const auto q = info.quant_variants(QuantSpec{});
      all.insert(all.end(), q.begin(), q.end());
    }
    for (const auto& v : all) {
      if (!has(selected, v)) selected.push_back(v);
    }
  }
  for (const auto& wanted : variants) {
    if (has(selected, wanted)) continue;
    std::vector<std::string> owners;  // ops outside the selection that have this variant
    for (const auto& op : op_registry()) {
      if (has(op.variants, wanted)) owners.push_back(op.name);
    }
    if (!owners.empty()) {
      throw std::invalid_argument("--variants: '" + wanted + "' is a variant of " + joined(owners) +
                                  ", which --ops does not select (add --ops=" + owners.front() +
                                  "; the selected ops have " + joined(selected) + ")");
    }
    throw std::invalid_argument("--variants: unknown variant '" + wanted +
                                "' (valid: " + joined(selected) + ")");
  }
}

}  // namespace fusebench::bench
