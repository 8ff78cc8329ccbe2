#pragma once
// The expert layers of a HF config.json as vLLM's MoE model classes build them: which decoder
// layers are MoE, the routed and shared experts, the dense layers between. Internal to src/core.
#include "fusebench/shapes.hpp"
#include "hf_config_reader.hpp"
#include "hf_families.hpp"

namespace fusebench::hf_config {

// The MoE layers of the model by the family's rule (Family::moe): placement, routed and shared
// experts, dense layers elsewhere; nothing for Moe::none.
void read_moe(const ConfigReader& c, const Family& f, ModelShape& m);
// gpt-oss's MLPBlock: FusedMoE(has_bias=True, activation="swigluoai") on gate/up interleaved w13,
// in every layer.
void read_gpt_oss_moe(const ConfigReader& c, const Family& f, ModelShape& m);

}  // namespace fusebench::hf_config
