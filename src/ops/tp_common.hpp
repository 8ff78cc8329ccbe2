#pragma once
// Helpers shared by the tensor-parallel pipelines (tp_attn, tp_mlp) and the collective sweep:
// the unsharded sizes behind a ShardShape, and weights that are windows of unsharded tensors.
#include <stdexcept>

#include "op_list.hpp"

namespace fusebench::ops::tp {

// Unsharded sizes recovered from one rank's shard (vLLM rules, see shapes.cpp).
struct Full {
  std::int64_t q = 0, kv = 0, intermediate = 0;
  std::int64_t kv_head0 = 0;  // first kv head this rank holds
};
inline Full full_sizes(const ShardShape& s) {
  if (s.rank < 0 || s.rank >= s.tp) {
    throw std::invalid_argument("rank " + std::to_string(s.rank) +
                                " is outside tp=" + std::to_string(s.tp));
  }
  Full f;
  f.q = s.q_size() * s.tp;
  f.kv = s.kv_heads * s.tp / s.kv_replicas * s.head_dim;
  f.intermediate = s.intermediate * s.tp;
  // With replication, ranks r*replicas .. (r+1)*replicas-1 share kv head r (vLLM).
  f.kv_head0 = static_cast<std::int64_t>(s.rank) / s.kv_replicas * s.kv_heads;
  return f;
}

struct WindowPart {
  std::string name;
  std::int64_t rows;          // rows of the part in this buffer
  BufferSpec::Window window;  // where it sits in the whole logical tensor
};

// A weight (or input) made of windows of whole logical tensors, stacked by rows.
inline int add_windowed(Plan& plan, const std::string& name, BufferRole role,
                        const std::vector<WindowPart>& parts, std::int64_t cols) {
  BufferSpec spec{name, 0, cols, role, {}, {}, {}};
  for (const auto& p : parts) {
    spec.parts.push_back(p.name);
    spec.part_rows.push_back(p.rows);
    spec.part_windows.push_back(p.window);
    spec.rows += p.rows;
  }
  return plan.add_buffer(std::move(spec));
}

// The logical tensor name of an MLP layer's weight or bias: `kind` "w" or "b", `what` "gate",
// "up" or "down": w_gate (dense), w_expert_gate (one routed expert), w_shared_expert_gate.
inline std::string mlp_tensor(LayerKind layer, const char* kind, const char* what) {
  const char* infix = layer == LayerKind::expert          ? "_expert_"
                      : layer == LayerKind::shared_expert ? "_shared_expert_"
                                                          : "_";
  return std::string(kind) + infix + what;
}

// vLLM's name of the activation kernel, for step labels.
inline std::string act_label(Activation act) { return std::string(to_string(act)) + "_and_mul"; }

// Columns [c0, c0+n) of a row-major [m, cols] matrix.
inline std::vector<double> column_slice(const std::vector<double>& a, std::int64_t m,
                                        std::int64_t cols, std::int64_t c0, std::int64_t n) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j)
      out.push_back(a[static_cast<std::size_t>(i * cols + c0 + j)]);
  }
  return out;
}

}  // namespace fusebench::ops::tp
