#pragma once
// --verify: before the sweep, every variant of every op is checked at the shapes the run will
// measure (each model, tp, op, dtype and token count of the selected fixtures) against the op's
// baseline variant and a float64 reference on the host. Where the reference (or the in-process
// TP ranks) would take too long on the host, it covers the first token rows only, and the output
// and the report say how many.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "fusebench/backend.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

// Multiply-adds the float64 reference may spend on one (op, shape, tokens, dtype): about a
// quarter of a second on one host core.
inline constexpr double kReferenceMacBudget = 2.5e8;

// Token rows the float64 reference covers for an op of `macs_per_row` multiply-adds per row:
// all `tokens` when they fit the budget, else as many as fit (at least 1).
std::int64_t reference_rows(double macs_per_row, std::int64_t tokens);

struct VerificationRun {
  nlohmann::json results = nlohmann::json::array();  // context["verification"]
  bool passed = true;  // every variant compared with something, and no mismatch
};

// Prints one line per variant on stderr and returns what goes into the report.
VerificationRun run_verification(Backend& backend, const std::vector<Fixture>& fixtures,
                                 std::uint64_t seed);

// context["verification_policy"]: how --verify chose its shapes and its reference rows.
nlohmann::json verification_policy();

}  // namespace fusebench::bench
