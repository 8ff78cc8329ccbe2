// libFuzzer target: the HF config.json reader (fusebench::parse_hf_config), its
// quantization_config reader (read_checkpoint_quant), the model name rule,
// and what the sweep builds from what the reader accepts: the shard of every layer at a few tp
// sizes, every op's plans on it and their cost, the report context. std::invalid_argument is the
// documented rejection; anything else escaping, or a sanitizer report (e.g. signed overflow on
// huge sizes), is a bug.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "fusebench/cost_model.hpp"
#include "fusebench/model_context.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/quant_checkpoint.hpp"
#include "fusebench/shapes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)fusebench::model_name_for_config("fuzz/config.json", text);
  std::optional<fusebench::CheckpointQuant> quant;
  try {
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (!json.is_discarded()) quant = fusebench::read_checkpoint_quant(json, "fuzz/config.json");
  } catch (const std::invalid_argument&) {
  }
  // What the reader accepts is a spec the suite runs: a throw here escapes as a bug.
  if (quant) (void)fusebench::parse_quant_spec(quant->spec.name());
  fusebench::ModelShape model;
  try {
    model = fusebench::parse_hf_config(text, "fuzz/config.json");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  (void)fusebench::model_context(model).dump();
  for (int tp : {1, 2, 3, 8}) {
    try {
      (void)fusebench::shard(model, tp);
    } catch (const std::invalid_argument&) {
    }
    for (const auto& op : fusebench::op_registry()) {
      for (fusebench::LayerKind layer : fusebench::op_layers(op.name, model)) {
        try {
          const fusebench::ShardShape s = fusebench::shard(model, tp, layer);
          for (const auto& variant : fusebench::variants_for(op, s)) {
            (void)fusebench::cost_of(
                fusebench::build_plan(op.name, variant, s, 1, fusebench::DType::bf16));
          }
        } catch (const std::invalid_argument&) {
        }
      }
    }
  }
  return 0;
}
