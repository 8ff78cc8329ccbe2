#pragma once
// --weights=DIR: a Hugging Face checkpoint's model (its config.json) and one decoder layer's
// weights (--layer, --expert), opened and checked before anything is measured, so every fault
// of the checkpoint (a missing or hostile file, a missing tensor, a dtype the suite cannot run,
// a shape or a bias the config contradicts) is bad input: exit 2 naming the file and the tensor
// (docs/checkpoints.md).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/hf_layer.hpp"
#include "fusebench/shapes.hpp"
#include "sweep.hpp"

namespace fusebench::bench {

struct CheckpointModel {
  ModelShape model;  // from DIR/config.json
  std::shared_ptr<const HfLayerWeights> layer;
};

// Opens DIR's config.json and checkpoint and validates layer `layer` (expert `expert`; -1: not
// given, 0), and with `all_experts` (the moe op) every routed expert of an MoE layer, each
// served as w_expert{e}_gate/up/down (HfLayerWeights::add_expert). Per-expert tensors or 3-D
// stacks of experts (with_stacked_experts). Throws std::invalid_argument (CheckpointError) naming
// the directory, file and tensor.
CheckpointModel open_checkpoint_model(const std::string& dir, int layer, std::int64_t expert,
                                      bool all_experts = false);

// The dtype a checkpoint runs in by default: its own (exact). Throws std::invalid_argument when
// its tensors differ in dtype or the backend cannot run it (fp16 on the CPU), saying which
// --dtypes would run it and whether that conversion is exact (`dtype_flag`: that flag's name in
// the front end asking, fusebench-region's --dtype).
DType checkpoint_run_dtype(const HfLayerWeights& layer, const std::string& dir,
                           const Backend& backend, const std::string& dtype_flag = "--dtypes");

// How the stored values become the run's: "exact (BF16 -> fp32)" or "rounds (F32 -> bf16,
// to nearest even)".
std::string conversion_text(const HfLayerWeights& layer, DType run);
bool conversion_exact(const HfLayerWeights& layer, DType run);

// Every weight part of every checkpoint fixture is served by its layer at the shape the plan
// asks for (has() plus a zero-size window): cheap, no tensor data is read. Throws
// std::invalid_argument naming the fixture and the tensor.
void check_checkpoint_fixtures(const std::vector<Fixture>& fixtures);

// Reads every weight the fixtures use once, in row blocks, so that a NaN or Inf (any dtype) or,
// where a conversion can overflow (an F32 or BF16 checkpoint in an fp16 run, F32 in bf16), a value
// beyond the run dtype's range is refused before the sweep (naming the tensor, the element and the
// value) rather than failing fixtures or verification with a mismatch that names neither.
void check_checkpoint_values(const std::vector<Fixture>& fixtures);

// context["weights"]: how random weights are made, and each checkpoint: directory, layer,
// fingerprint, family, stored dtypes, each run dtype's conversion, the tensors read, what was
// left out.
nlohmann::json weights_context(const Sweep& sweep);

}  // namespace fusebench::bench
