#include "measure/rotation.hpp"

#include <cstddef>
#include <variant>

namespace fusebench::measure {
namespace {

bool has_collectives(const Plan& plan) { return plan.has_collectives(); }

}  // namespace

Rotation rotation_for(const Plan& plan, std::size_t cache_bytes, std::size_t memory_budget) {
  if (has_collectives(plan))
    return {1, false, "plan has collectives: one set (rank buffers are not rotated)"};
  return rotation_sets(plan.total_bytes(), cache_bytes, memory_budget);
}

RotationSets::RotationSets(Workspace& ws, Rotation rotation)
    : ws_(ws), rotation_(std::move(rotation)) {
  const Plan& plan = ws.plan();
  Backend& backend = ws.backend();
  std::vector<std::byte> host;
  try {
    for (std::size_t s = 1; s < rotation_.sets; ++s) {
      extra_.emplace_back();
      for (int b = 0; b < static_cast<int>(plan.buffers.size()); ++b) {
        const std::size_t bytes = plan.buffer_bytes(b);
        extra_.back().push_back(backend.allocate(bytes));
        const auto& spec = plan.buffers[static_cast<std::size_t>(b)];
        const MatRef whole = ws.ref(View{b, 0, 0, spec.rows, spec.cols});
        host.resize(bytes);
        backend.download(host.data(), whole.data, bytes);
        backend.upload(extra_.back().back(), host.data(), bytes);
      }
    }
  } catch (...) {
    for (auto& set : extra_) {
      for (void* p : set) backend.release(p);
    }
    throw;
  }
}

RotationSets::~RotationSets() {
  Backend& backend = ws_.backend();
  try {
    backend.synchronize();
  } catch (...) {
    // Freeing after a failed kernel is still right.
  }
  for (auto& set : extra_) {
    for (void* p : set) backend.release(p);
  }
}

void RotationSets::run(std::size_t set, const std::function<void()>& set0) {
  const std::size_t i = set % sets();
  if (i == 0) {
    set0();
  } else {
    ws_.run_on(extra_[i - 1]);
  }
}

}  // namespace fusebench::measure
