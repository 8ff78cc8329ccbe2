#pragma once
// Checks of the sweep's axes that need the op registry, kept apart from build_sweep.
#include <string>
#include <vector>

namespace fusebench::bench {

// Throws std::invalid_argument for a --variants value that no selected op has, naming the ops
// that have it (e.g. naive: "add --ops=tp_attn") or listing the valid ones.
void check_variants_exist(const std::vector<std::string>& variants,
                          const std::vector<std::string>& ops);

}  // namespace fusebench::bench
