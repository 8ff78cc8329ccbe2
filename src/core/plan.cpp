#include "fusebench/plan.hpp"

namespace fusebench {

int Plan::add_buffer(BufferSpec spec) {
  buffers.push_back(std::move(spec));
  return static_cast<int>(buffers.size()) - 1;
}

std::size_t Plan::buffer_bytes(int index) const {
  const auto& b = buffers.at(static_cast<std::size_t>(index));
  return static_cast<std::size_t>(b.rows * b.cols) * dtype_size(dtype);
}

std::size_t Plan::total_bytes() const {
  std::size_t total = 0;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i) total += buffer_bytes(i);
  return total;
}

}  // namespace fusebench
