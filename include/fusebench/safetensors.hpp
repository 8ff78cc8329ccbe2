#pragma once
// Hugging Face safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets [begin, end)}, "__metadata__": {...}}, then the raw bytes.
// A file is memory-mapped and validated completely before any tensor is handed out, so only the
// tensors asked for are read from disk, and a hostile file gets an error naming the file and the
// tensor, never an out-of-bounds read (docs/checkpoints.md).
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/printable.hpp"  // quote_name, printable for its messages

namespace fusebench {

// A checkpoint that cannot be read or used as asked: bad input, so fusebench exits 2. The message
// names the file and, where there is one, the tensor.
class CheckpointError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Every element type the safetensors format defines (safetensors 0.8).
enum class TensorDtype {
  BOOL,
  U8,
  I8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  F4,
  F6_E2M3,
  F6_E3M2,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  F16,
  BF16,
  F32,
  F64,
  C64,
};

std::string_view to_string(TensorDtype dtype);
std::optional<TensorDtype> parse_tensor_dtype(std::string_view name);
int dtype_bits(TensorDtype dtype);  // bits per element (F4: 4, F6_*: 6)
std::string known_tensor_dtypes();  // "BOOL, U8, ..." for messages

struct TensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data section (after the header)
  std::uint64_t elements() const;    // product of the shape (validated not to overflow)
};

struct SafetensorsHeader {
  std::uint64_t header_bytes = 0;  // N
  std::map<std::string, TensorInfo, std::less<>> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::uint64_t data_offset() const { return 8 + header_bytes; }
};

// Parses and validates a whole file's bytes; `label` names the file in errors. Checks: the header
// length against the file size (and the format's 100 MB limit), JSON, the shape of every entry,
// dtype names, shapes against byte ranges (overflow-safe), every range inside the data, and that
// the tensors cover the data exactly once (no overlap, no gap, nothing after), as the reference
// implementation requires. Throws CheckpointError.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& label);

// One safetensors file, memory-mapped read-only: pages are read when a tensor's bytes are used.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates; throws CheckpointError
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const TensorInfo* find(std::string_view name) const;
  // Throws CheckpointError naming the file and the tensor when it is absent.
  const TensorInfo& tensor(std::string_view name) const;
  std::span<const std::byte> bytes(const TensorInfo& info) const;
  std::span<const std::byte> header_json() const;  // the N header bytes as stored

 private:
  std::string path_;
  const std::byte* map_ = nullptr;
  std::size_t size_ = 0;
  SafetensorsHeader header_;
};

}  // namespace fusebench
