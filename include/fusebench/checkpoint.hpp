#pragma once
// A Hugging Face model directory's weights, and their values in the run's dtype.
// Which files: model.safetensors.index.json ({"weight_map": {tensor: file}}) when present, else
// model.safetensors, else every *.safetensors in the directory (docs/checkpoints.md).
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/dtype.hpp"
#include "fusebench/file_kind.hpp"
#include "fusebench/safetensors.hpp"

namespace fusebench {

class Checkpoint {
 public:
  // Opens and validates every file the checkpoint uses (headers only: the data stays on disk
  // until asked for). Throws CheckpointError naming the directory, file and tensor at fault.
  explicit Checkpoint(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const std::string& index_path() const { return index_path_; }  // empty without an index
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  struct Tensor {
    const SafetensorsFile& file;
    const TensorInfo& info;
  };
  bool has(std::string_view name) const;
  // Throws CheckpointError naming the tensor and where it was looked for.
  Tensor tensor(std::string_view name) const;
  // Where names are looked up, for messages: the index, the file, or the files.
  std::string lookup_description() const;
  // Identifies the checkpoint without reading its data: FNV-1a 64 of the index and of every
  // file's name and header, as "fnv1a64:<16 hex digits>" (an identity, not a security hash).
  std::string fingerprint() const;

 private:
  std::string dir_, index_path_, index_text_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::size_t, std::less<>> where_;  // tensor -> index into files_
};

// The run dtype a stored dtype converts to exactly (BF16, F16, F32), or nullopt.
std::optional<DType> exact_run_dtype(TensorDtype stored);
// Why weights stored as `stored` cannot be run (e.g. fp8 with scales); empty when they can.
std::string unrunnable_reason(TensorDtype stored);
// Whether every value of `stored` is exactly representable in `run` (else encode() rounds it
// to nearest even, and values beyond the run dtype's range are refused).
bool converts_exactly(TensorDtype stored, DType run);
// Whether some finite value of `stored` is beyond the range of `run` (F32 or BF16 in an fp16
// run, F32 in a bf16 run): only then can a conversion overflow, which read_window refuses.
bool conversion_may_overflow(TensorDtype stored, DType run);

// A tensor read as a matrix: 2-D as stored, 1-D (a bias) as one column. Throws CheckpointError
// for other ranks.
struct MatrixShape {
  std::int64_t rows = 0, cols = 0;
};
MatrixShape matrix_shape(const SafetensorsFile& file, const TensorInfo& info);
MatrixShape matrix_shape(const std::string& label, const TensorInfo& info);

// Rows [row0, row0+rows) x columns [col0, col0+cols) of the matrix, as floats: exact for BF16,
// F16 and F32. `run` is the dtype the values will be encoded to: a finite value that would
// become infinite there is refused, naming the tensor, the element and the value, and so is a
// NaN or Inf (the flat element and its index in the tensor's shape). Other stored
// dtypes are refused with unrunnable_reason(). Touches only the window's pages of the file.
std::vector<float> read_window(const SafetensorsFile& file, const TensorInfo& info,
                               std::int64_t row0, std::int64_t col0, std::int64_t rows,
                               std::int64_t cols, DType run);
// The same on the tensor's bytes from anywhere (`label` names their file in errors); `bytes` must
// be the tensor's whole range, as parse_safetensors() validated it.
std::vector<float> read_window(const std::string& label, std::span<const std::byte> bytes,
                               const TensorInfo& info, std::int64_t row0, std::int64_t col0,
                               std::int64_t rows, std::int64_t cols, DType run);

}  // namespace fusebench
