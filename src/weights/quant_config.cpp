// config.json's quantization_config as the quant spec of a run (quant_checkpoint.hpp); the
// scale tensors themselves are read in quant_checkpoint.cpp. Fuzzed by fuzz_hf_config.
#include <fstream>
#include <sstream>

#include "fusebench/input_files.hpp"
#include "fusebench/quant_checkpoint.hpp"

namespace fusebench {
namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& field,
                         const std::string& what) {
  throw CheckpointError(path + ": quantization_config" + (field.empty() ? "" : "." + field) + ": " +
                        what);
}

std::string text_of(const nlohmann::json& j) { return j.dump(); }

// `field` of `obj` as a string; `fallback` when absent (nullopt: required).
std::string string_field(const nlohmann::json& obj, const std::string& field,
                         const std::string& path, const std::string& prefix,
                         std::optional<std::string> fallback = std::nullopt) {
  if (!obj.contains(field) || obj[field].is_null()) {
    if (fallback) return *fallback;
    refuse(path, prefix + field, "missing (a string is required)");
  }
  if (!obj[field].is_string())
    refuse(path, prefix + field, text_of(obj[field]) + " is not a string");
  return obj[field].get<std::string>();
}

// [128, 128] or refused: the suite's block kernels and scale grids are 128x128 (kQuantBlock).
void check_block(const nlohmann::json& block, const std::string& path, const std::string& field) {
  if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() ||
      !block[1].is_number_integer())
    refuse(path, field, text_of(block) + " is not a [block_n, block_k] pair of integers");
  if (block[0].get<std::int64_t>() != kQuantBlock || block[1].get<std::int64_t>() != kQuantBlock)
    refuse(path, field,
           text_of(block) +
               ": the suite runs 128x128 weight blocks only (DeepSeek-V3's and "
               "Qwen3-FP8's [128, 128])");
}

CheckpointQuant read_fp8(const nlohmann::json& q, const std::string& path) {
  CheckpointQuant out;
  out.method = "fp8";
  out.stored = TensorDtype::F8_E4M3;
  const std::string scheme = string_field(q, "activation_scheme", path, "", "dynamic");
  if (scheme != "dynamic" && scheme != "static")
    refuse(path, "activation_scheme", "'" + scheme + "' (valid: dynamic, static)");
  if (q.contains("fmt") && q["fmt"] != "e4m3")
    refuse(path, "fmt", text_of(q["fmt"]) + ": fp8 checkpoints are read as e4m3 (F8_E4M3) only");
  out.spec.dtype = QuantDType::fp8_e4m3fn;
  out.read_as = "quant_method fp8, activation_scheme " + scheme;
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    check_block(q["weight_block_size"], path, "weight_block_size");
    if (scheme != "dynamic")
      refuse(path, "activation_scheme",
             "'static' with weight_block_size: vLLM's block-wise FP8 runs dynamic activations "
             "only (valid: dynamic)");
    out.spec.weights = WeightScales::block;
    out.spec.activations = ActScales::group;
    out.scale_suffix = "weight_scale_inv";
    out.read_as += ", weight_block_size [128, 128]";
  } else {
    out.spec.weights = WeightScales::tensor;
    out.spec.activations = ActScales::tensor;
    out.spec.scheme = scheme == "static" ? ActScheme::static_scale : ActScheme::dynamic;
    out.scale_suffix = "weight_scale";
  }
  return out;
}

// One compressed-tensors quantization args object: 8 bits, symmetric, float or int.
struct Args {
  std::string type, strategy;
  bool dynamic = false;
};
Args read_args(const nlohmann::json& a, const std::string& path, const std::string& field) {
  if (!a.is_object()) refuse(path, field, text_of(a) + " is not an object");
  if (!a.contains("num_bits") || !a["num_bits"].is_number_integer())
    refuse(path, field + ".num_bits", "missing or not an integer");
  if (const auto bits = a["num_bits"].get<std::int64_t>(); bits != 8)
    refuse(path, field + ".num_bits",
           std::to_string(bits) +
               ": the suite runs 8-bit weights and activations (fp8 or int8 w8a8); 4-bit "
               "schemes (w4a16, w4a8, nvfp4) are not read");
  Args out;
  out.type = string_field(a, "type", path, field + ".", "int");
  if (out.type != "float" && out.type != "int")
    refuse(path, field + ".type", "'" + out.type + "' (valid: float, int)");
  if (a.contains("symmetric") && a["symmetric"] != true)
    refuse(path, field + ".symmetric",
           text_of(a["symmetric"]) +
               ": asymmetric quantization (zero points) is not run; the suite's int8 and fp8 are "
               "symmetric (valid: true)");
  out.strategy = string_field(a, "strategy", path, field + ".", "tensor");
  if (a.contains("dynamic")) {
    if (!a["dynamic"].is_boolean())
      refuse(path, field + ".dynamic", text_of(a["dynamic"]) + " (valid: true, false)");
    out.dynamic = a["dynamic"].get<bool>();
  }
  return out;
}

CheckpointQuant read_compressed_tensors(const nlohmann::json& q, const std::string& path) {
  CheckpointQuant out;
  out.method = "compressed-tensors";
  out.scale_suffix = "weight_scale";
  const std::string format = string_field(q, "format", path, "", "");
  if (!format.empty() && format != "float-quantized" && format != "int-quantized" &&
      format != "naive-quantized")
    refuse(path, "format",
           "'" + format +
               "': the suite reads unpacked 8-bit formats only (valid: float-quantized, "
               "int-quantized, naive-quantized)");
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty())
    refuse(path, "config_groups", "missing or empty (one group of weights and activations)");
  const auto& groups = q["config_groups"];
  if (groups.size() != 1)
    refuse(path, "config_groups",
           std::to_string(groups.size()) +
               " groups: the suite runs one scheme per checkpoint (a mixed-precision checkpoint "
               "has several)");
  const std::string gname = groups.begin().key();
  const auto& g = groups.begin().value();
  const std::string gfield = "config_groups." + gname;
  if (!g.contains("weights") || g["weights"].is_null())
    refuse(path, gfield + ".weights", "missing (the group quantizes no weights)");
  const Args w = read_args(g["weights"], path, gfield + ".weights");
  if (!g.contains("input_activations") || g["input_activations"].is_null())
    refuse(path, gfield + ".input_activations",
           "null: a weight-only scheme (w8a16), whose activations stay bf16; the suite runs "
           "w8a8 (the activations quantized too)");
  const Args a = read_args(g["input_activations"], path, gfield + ".input_activations");
  if (a.type != w.type)
    refuse(path, gfield + ".input_activations.type",
           "'" + a.type + "' beside weights of type '" + w.type + "': the suite runs both as one");
  if (w.dynamic)
    refuse(path, gfield + ".weights.dynamic",
           "true: stored weights have stored scales (valid: false)");
  out.spec.dtype = w.type == "float" ? QuantDType::fp8_e4m3fn : QuantDType::int8;
  out.stored = w.type == "float" ? TensorDtype::F8_E4M3 : TensorDtype::I8;
  if (w.strategy == "tensor") {
    out.spec.weights = WeightScales::tensor;
  } else if (w.strategy == "channel") {
    out.spec.weights = WeightScales::channel;
  } else if (w.strategy == "block") {
    if (w.type != "float")
      refuse(path, gfield + ".weights.strategy",
             "'block' with int weights (valid: tensor, channel)");
    const auto& wj = g["weights"];
    if (!wj.contains("block_structure"))
      refuse(path, gfield + ".weights.block_structure", "missing (strategy block needs it)");
    check_block(wj["block_structure"], path, gfield + ".weights.block_structure");
    out.spec.weights = WeightScales::block;
  } else {
    refuse(path, gfield + ".weights.strategy",
           "'" + w.strategy +
               "' (valid: tensor, channel, block; group scales belong to 4-bit schemes)");
  }
  if (a.strategy == "tensor") {
    out.spec.activations = ActScales::tensor;
  } else if (a.strategy == "token") {
    out.spec.activations = ActScales::token;
  } else if (a.strategy == "group") {
    out.spec.activations = ActScales::group;
  } else {
    refuse(path, gfield + ".input_activations.strategy",
           "'" + a.strategy + "' (valid: tensor, token, group)");
  }
  out.spec.scheme = a.dynamic ? ActScheme::dynamic : ActScheme::static_scale;
  // The combinations the suite's kernels run (parse_quant_spec's rules: block weights take dynamic
  // 1x128 groups, static needs one per-tensor scale).
  try {
    out.spec = parse_quant_spec(out.spec.name());
  } catch (const std::invalid_argument& e) {
    refuse(path, gfield, out.spec.name() + " is not run: " + e.what());
  }
  out.read_as = "quant_method compressed-tensors, " + gfield + ": weights " + w.type + " 8-bit " +
                w.strategy + ", input_activations " + a.strategy + " " +
                (a.dynamic ? "dynamic" : "static");
  return out;
}

}  // namespace

std::string CheckpointQuant::scale_of(const std::string& weight) const {
  const std::string stem = weight.size() > 7 && weight.ends_with(".weight")
                               ? weight.substr(0, weight.size() - 7)
                               : weight;
  return stem + "." + scale_suffix;
}

std::string CheckpointQuant::input_scale_of(const std::string& weight) const {
  const std::string stem = weight.size() > 7 && weight.ends_with(".weight")
                               ? weight.substr(0, weight.size() - 7)
                               : weight;
  return stem + ".input_scale";
}

std::optional<CheckpointQuant> read_checkpoint_quant(const nlohmann::json& config,
                                                     const std::string& path) {
  if (!config.is_object()) return std::nullopt;
  const char* key = config.contains("quantization_config")  ? "quantization_config"
                    : config.contains("compression_config") ? "compression_config"
                                                            : nullptr;
  if (key == nullptr || config[key].is_null()) return std::nullopt;
  const auto& q = config[key];
  if (!q.is_object()) refuse(path, "", text_of(q) + " is not an object");
  const std::string method = string_field(q, "quant_method", path, "");
  if (method == "fp8") return read_fp8(q, path);
  if (method == "compressed-tensors" || method == "compressed_tensors")
    return read_compressed_tensors(q, path);
  refuse(path, "quant_method",
         "'" + method +
             "' is not read (valid: fp8, compressed-tensors); GPTQ, AWQ, bitsandbytes, mxfp4 "
             "and the other methods pack weights the suite does not run");
}

std::optional<CheckpointQuant> read_checkpoint_quant_file(const std::string& config_path) {
  nlohmann::json j;
  try {
    j = parse_input_json(read_input_file(config_path, "the checkpoint config"), config_path);
  } catch (const InputFileError& e) {
    throw CheckpointError(e.what());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(config_path + ": not JSON: " + e.what());
  }
  return read_checkpoint_quant(j, config_path);
}

}  // namespace fusebench
