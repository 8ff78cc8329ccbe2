#include "fusebench/plan.hpp"

#include <stdexcept>

#include "fusebench/checked_size.hpp"

namespace fusebench {

bool is_collective(const Step& step) {
  return std::holds_alternative<AllReduceStep>(step) ||
         std::holds_alternative<AllGatherStep>(step) ||
         std::holds_alternative<ReduceScatterStep>(step) ||
         std::holds_alternative<AllGatherRowsStep>(step) ||
         std::holds_alternative<AllToAllRowsStep>(step);
}

int Plan::add_buffer(BufferSpec spec) {
  buffers.push_back(std::move(spec));
  return static_cast<int>(buffers.size()) - 1;
}

int Plan::add_step(Step step, int lane, std::vector<int> after) {
  const bool ordered = !order.empty() || lane != 0 || !after.empty();
  if (ordered) order.resize(steps.size());  // the steps before: lane 0, in order
  steps.push_back(std::move(step));
  if (ordered) order.push_back({lane, std::move(after)});
  return static_cast<int>(steps.size()) - 1;
}

const StepOrder& Plan::order_of(std::size_t step) const {
  static const StepOrder in_order{};
  return order.empty() ? in_order : order.at(step);
}

bool Plan::has_collectives() const {
  for (const Step& s : steps) {
    if (is_collective(s)) return true;
  }
  return false;
}

void Plan::check_order() const {
  const auto fail = [&](const std::string& why) {
    throw std::logic_error("plan " + op + "/" + variant + ": " + why);
  };
  if (order.empty()) return;
  if (order.size() != steps.size())
    fail(std::to_string(order.size()) + " step orders for " + std::to_string(steps.size()) +
         " steps");
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i].lane < 0 || order[i].lane >= kLanes)
      fail("step " + std::to_string(i) + " on lane " + std::to_string(order[i].lane));
    for (int j : order[i].after) {
      if (j < 0 || static_cast<std::size_t>(j) >= i)
        fail("step " + std::to_string(i) + " waits for step " + std::to_string(j));
    }
  }
}

std::string Plan::size_context() const {
  return op + "/" + variant + " at --tokens=" + std::to_string(tokens) + " (dtype " +
         std::string(to_string(dtype)) + ")";
}

std::size_t Plan::buffer_bytes(int index) const {
  const auto& b = buffers.at(static_cast<std::size_t>(index));
  const std::size_t elem = b.store == BufferSpec::Store::codes    ? 1
                           : b.store == BufferSpec::Store::scales ? 4
                                                                  : dtype_size(dtype);
  const auto what = [&] {
    return size_context() + ": buffer '" + b.name + "' [" + std::to_string(b.rows) + " x " +
           std::to_string(b.cols) + "] of " + std::to_string(elem) + "-byte elements";
  };
  return size_mul(size_mul(b.rows, b.cols, what), elem, what);
}

std::size_t Plan::total_bytes() const {
  std::uint64_t total = 0;
  for (int i = 0; i < static_cast<int>(buffers.size()); ++i)
    total = size_add(total, buffer_bytes(i), [&] { return size_context() + ": total bytes"; });
  return total;
}

}  // namespace fusebench
