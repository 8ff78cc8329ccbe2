// libFuzzer target: the safetensors header parser (fusebench::parse_safetensors) on arbitrary
// bytes, then, for every tensor it accepts, a read of all its bytes and a decode of a window of it
// (read_window). CheckpointError is the documented rejection; anything else escaping, or a
// sanitizer report (an out-of-bounds read, an overflow), is a bug.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fusebench/checkpoint.hpp"
#include "fusebench/safetensors.hpp"

volatile unsigned fuzz_sink = 0;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  fusebench::SafetensorsHeader header;
  try {
    header = fusebench::parse_safetensors(file, "fuzz.safetensors");
  } catch (const fusebench::CheckpointError&) {
    return 0;
  }
  unsigned sum = 0;
  for (const auto& [name, info] : header.tensors) {
    // Every accepted range lies inside the buffer: ASan checks each byte read here.
    const auto bytes = file.subspan(header.data_offset() + info.begin, info.end - info.begin);
    for (std::byte b : bytes) sum += std::to_integer<unsigned>(b);
    try {
      const auto m = fusebench::matrix_shape("fuzz.safetensors", info);
      // A window from the middle to the end, in a dtype that may overflow.
      (void)fusebench::read_window("fuzz.safetensors", bytes, info, m.rows / 2, m.cols / 3,
                                   m.rows - m.rows / 2, m.cols - m.cols / 3,
                                   (sum & 1) ? fusebench::DType::f16 : fusebench::DType::bf16);
    } catch (const fusebench::CheckpointError&) {
    }
  }
  fuzz_sink = sum;  // keeps the reads from being optimised away
  return 0;
}
