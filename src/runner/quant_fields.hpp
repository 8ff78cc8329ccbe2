#pragma once
// The fields of a quantized entry (docs/report.md): what it runs (`quant`, `emulated`) and how
// accurate it is (`quant_error` per output shard against the float64 product of the unquantized
// weights and inputs; a fused variant's `quant_error_vs_split` per shard against split's output).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/workspace.hpp"
#include "runner/sweep.hpp"

namespace fusebench::bench {

// `quant` (spec, dtype, scales, scheme, how the variant merges its shards, how this backend runs
// it) and `emulated`.
void add_quant_description(const Fixture& f, const Backend& backend, nlohmann::json& fields);

// The first `rows` rows of each of the plan's quant_outputs, after one more run of `ws` (`run`
// false: as the last run left them, e.g. a TP pipeline's rank 0 after every rank ran it).
using ShardOutputs = std::map<std::string, std::vector<float>>;
ShardOutputs read_quant_outputs(Workspace& ws, std::int64_t rows, bool run = true);

// The token rows the accuracy fields cover (the verifier's float64 budget; a sequence-parallel
// TP plan: no more than its rank 0 holds, which are the first rows of the result).
std::int64_t quant_reference_rows(const Fixture& f);

// quant_error (and quant_error_vs_split where `split`, the outputs of the op's quant_split
// variant, is given and this is another variant), over the first quant_reference_rows rows, with
// `quant_error_rows` saying how many. A TP pipeline's reference is the unsharded layer pair
// (its paired plan's, on the whole logical tensors).
void add_quant_accuracy(const Fixture& f, const ShardOutputs& got, const ShardOutputs* split,
                        std::uint64_t seed, nlohmann::json& fields);

}  // namespace fusebench::bench
