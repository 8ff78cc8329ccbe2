#pragma once
// How a model was read, for the report's context: family and vLLM class, the attention and MLP
// layers the suite benchmarks (with what a layer:expert fixture stands for), and the ops it
// refuses with the reason.
#include <nlohmann/json.hpp>

#include "fusebench/shapes.hpp"

namespace fusebench {

nlohmann::json model_context(const ModelShape& model);

}  // namespace fusebench
