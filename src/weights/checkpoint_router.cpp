// A checkpoint layer's MoE router, by model_type, as vLLM's model classes name it.
#include "fusebench/checkpoint_router.hpp"

#include "fusebench/hf_layer.hpp"

namespace fusebench {
namespace {

std::string at_layer(std::string name, int layer) {
  const std::string key = "{layer}";
  return name.replace(name.find(key), key.size(), std::to_string(layer));
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

}  // namespace

RouterTensorNames router_tensor_names(std::string_view type) {
  const std::string layer = "model.layers.{layer}.";
  // Mixtral's MixtralSparseMoeBlock.gate; Qwen2/3-MoE's, OLMoE's and DeepSeek's mlp.gate (a
  // ReplicatedLinear), DeepSeek-V3's and GLM-4-MoE's gate.e_score_correction_bias; GraniteMoE's
  // router.layer; DBRX's ffn.router.layer.
  if (type == "mixtral") return {layer + "block_sparse_moe.gate.weight", ""};
  if (type == "qwen2_moe" || type == "qwen3_moe" || type == "olmoe" || type == "deepseek_v2")
    return {layer + "mlp.gate.weight", ""};
  if (type == "deepseek_v3" || type == "glm4_moe" || type == "dots1")
    return {layer + "mlp.gate.weight", layer + "mlp.gate.e_score_correction_bias"};
  if (type == "granitemoe" || type == "granitemoeshared")
    return {layer + "block_sparse_moe.router.layer.weight", ""};
  if (type == "dbrx") return {"transformer.blocks.{layer}.ffn.router.layer.weight", ""};
  // Llama-4's Llama4MoE.router (vLLM: a ReplicatedLinear at feed_forward.router; transformers'
  // Llama4Router, an nn.Linear); the multimodal checkpoint's language_model prefix is found by
  // with_text_prefix.
  if (type == "llama4" || type == "llama4_text") return {layer + "feed_forward.router.weight", ""};
  return {};
}

RouterWeights read_router(const Checkpoint& checkpoint, const ModelShape& model, int layer,
                          bool correction_bias) {
  const RouterTensorNames names = router_tensor_names(model.family);
  const std::string where = checkpoint.lookup_description();
  if (names.weight.empty()) {
    throw CheckpointError(
        where + ": model_type " + quote_name(model.family) +
        ": its router tensor is not mapped (mapped: mixtral, qwen2_moe, "
        "qwen3_moe, olmoe, deepseek_v2, deepseek_v3, glm4_moe, dots1, "
        "granitemoe, granitemoeshared, dbrx, llama4, llama4_text); route the moe op with "
        "--routing=uniform, balanced, zipf:S or file:PATH instead");
  }
  if (correction_bias && names.bias.empty()) {
    throw CheckpointError(where + ": model_type " + quote_name(model.family) +
                          ": its rule routes on an e_score_correction_bias whose tensor is not "
                          "mapped; route the moe op with --routing=uniform, balanced, zipf:S or "
                          "file:PATH instead");
  }
  RouterWeights out;
  const auto read = [&](const std::string& pattern, std::vector<std::int64_t> want,
                        const std::string& expected) {
    const std::string name = with_text_prefix(checkpoint, at_layer(pattern, layer));
    if (!checkpoint.has(name)) {
      throw CheckpointError(where + ": no tensor " + quote_name(name) + " (layer " +
                            std::to_string(layer) + "'s router, which --routing=router reads; " +
                            "route with --routing=uniform, balanced, zipf:S or file:PATH without "
                            "it)");
    }
    const auto t = checkpoint.tensor(name);
    if (t.info.shape != want) {
      throw CheckpointError(t.file.path() + ": tensor " + quote_name(name) + ": shape " +
                            shape_text(t.info.shape) + " does not match the config: expected " +
                            expected + " = " + shape_text(want));
    }
    if (!out.name.empty()) out.name += ", ";
    out.name += name;
    const std::int64_t rows = want[0], cols = want.size() > 1 ? want[1] : 1;
    return read_window(t.file, t.info, 0, 0, rows, cols, DType::f32);
  };
  out.router_w = read(names.weight, {model.experts, model.hidden}, "[num_experts, hidden_size]");
  if (correction_bias) out.bias = read(names.bias, {model.experts}, "[num_experts]");
  out.name = "checkpoint " + checkpoint.dir() + ": " + out.name;
  return out;
}

}  // namespace fusebench
