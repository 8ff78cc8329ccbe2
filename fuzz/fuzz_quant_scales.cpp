// libFuzzer target: a quantized checkpoint's scales (fusebench::check_quant_scales and
// read_scale_values, quant_checkpoint.hpp) read from arbitrary safetensors bytes, under each of
// the quantization configs the suite reads (the first byte picks one). The bytes are written as
// model.safetensors in a scratch directory, as a checkpoint is read. CheckpointError (the
// documented refusal, naming the tensor) is the only exception allowed out; a scale accepted
// must be within kMinQuantScale..kMaxQuantScale.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebench/checkpoint.hpp"
#include "fusebench/quant_checkpoint.hpp"

namespace {

const char* const kConfigs[] = {
    R"({"quant_method": "fp8", "activation_scheme": "dynamic"})",
    R"({"quant_method": "fp8", "activation_scheme": "static"})",
    R"({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]})",
    R"({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "int", "symmetric": true, "strategy": "channel",
                    "dynamic": false},
        "input_activations": {"num_bits": 8, "type": "int", "symmetric": true,
                              "strategy": "token", "dynamic": true}}}})",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  if (size < 1) return 0;
  // One scratch directory per process, removed when it exits.
  static const struct Scratch {
    fs::path dir = fs::temp_directory_path() / ("fuzz_quant_scales." + std::to_string(::getpid()));
    Scratch() { fs::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } scratch;
  const fs::path& dir = scratch.dir;
  {
    std::ofstream out(dir / "model.safetensors", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  std::optional<fusebench::CheckpointQuant> quant;
  try {
    const auto config =
        nlohmann::json::parse(kConfigs[data[0] % (sizeof(kConfigs) / sizeof(kConfigs[0]))]);
    quant = fusebench::read_checkpoint_quant({{"quantization_config", config}}, "fuzz/config.json");
  } catch (const fusebench::CheckpointError&) {
  }
  if (!quant) return 0;
  try {
    const fusebench::Checkpoint checkpoint(dir.string());
    std::vector<std::string> names;
    for (const auto& file : checkpoint.files())
      for (const auto& [name, info] : file->header().tensors) names.push_back(name);
    for (const auto& name : names) {
      try {
        for (float s : fusebench::read_scale_values(checkpoint, name))
          if (!(s >= fusebench::kMinQuantScale && s <= fusebench::kMaxQuantScale)) __builtin_trap();
      } catch (const fusebench::CheckpointError&) {
      }
      if (name.size() > 7 && name.ends_with(".weight")) {
        try {
          (void)fusebench::check_quant_scales(checkpoint, *quant, name);
        } catch (const fusebench::CheckpointError&) {
        }
      }
    }
  } catch (const fusebench::CheckpointError&) {
  }
  return 0;
}
