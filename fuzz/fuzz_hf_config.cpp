// libFuzzer target: the HF config.json reader (fusebench::parse_hf_config) and TP sharding of
// what it accepts. std::invalid_argument is the documented rejection; anything else escaping, or
// a sanitizer report (e.g. signed overflow on huge sizes), is a bug.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include "fusebench/shapes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fusebench::ModelShape model;
  try {
    model = fusebench::parse_hf_config(text, "fuzz/config.json");
  } catch (const std::invalid_argument&) {
    return 0;
  }
  for (int tp : {1, 2, 3, 8}) {
    try {
      (void)fusebench::shard(model, tp);
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}
