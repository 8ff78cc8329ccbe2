#pragma once
// Helpers shared by the tensor-parallel pipelines (tp_attn, tp_mlp) and the collective sweep:
// the unsharded sizes behind a ShardShape, and weights that are windows of unsharded tensors.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fusebench/checked_size.hpp"
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

// The RMSNorm every TP pipeline ends with (on all M rows after the all-reduce, or on a rank's
// M/tp rows after the reduce-scatter), so every variant computes the same thing. Its gain is an
// input-role tensor: values in [-1, 1), O(1) like the outputs the tolerance is stated for.
inline constexpr float kNormEps = 1e-6f;
inline int add_norm_weight(Plan& plan, std::int64_t hidden) {
  return plan.add_buffer({"w_norm", 1, hidden, BufferRole::input, {"w_norm"}, {1}, {}});
}

// out[i, :] = x[i, :] / sqrt(mean(x[i, :]^2) + eps) * w, in float64.
inline std::vector<double> reference_rms_norm(const std::vector<double>& x, std::int64_t m,
                                              std::int64_t h, const std::vector<float>& w) {
  std::vector<double> out(x.size());
  for (std::int64_t i = 0; i < m; ++i) {
    double sum = 0;
    for (std::int64_t j = 0; j < h; ++j)
      sum += x[static_cast<std::size_t>(i * h + j)] * x[static_cast<std::size_t>(i * h + j)];
    const double inv = 1.0 / std::sqrt(sum / static_cast<double>(h) + kNormEps);
    for (std::int64_t j = 0; j < h; ++j) {
      const auto k = static_cast<std::size_t>(i * h + j);
      out[k] = x[k] * inv * static_cast<double>(w[static_cast<std::size_t>(j)]);
    }
  }
  return out;
}

// Sequence parallel: M padded to a multiple of tp; rank r holds rows [row0, row0 + local) of
// the padded tensor, of which `real` lie below M (the rest are zero rows).
struct SpRows {
  std::int64_t padded = 0, local = 0, row0 = 0, real = 0;
};
inline SpRows sp_rows(const ShardShape& s, std::int64_t m) {
  SpRows r;
  const auto what = [&] {
    return "--tokens=" + std::to_string(m) + " padded to a multiple of tp=" + std::to_string(s.tp);
  };
  r.local = static_cast<std::int64_t>(size_add(m, s.tp - 1, what)) / s.tp;
  r.padded = r.local * s.tp;
  r.row0 = s.rank * r.local;
  r.real = std::clamp<std::int64_t>(m - r.row0, 0, r.local);
  return r;
}

// The overlap variant's chunks of a rank's `local` rows: min(tp, local) of near-equal size, as
// {first row, rows}. Chunk c is all-gathered from every rank at once, so in the gathered tensor
// it occupies rows [tp * first, tp * (first + rows)), rank j's part at [tp * first + j * rows).
struct Chunk {
  std::int64_t first = 0, rows = 0;
};
inline std::vector<Chunk> overlap_chunks(std::int64_t local, int tp) {
  const std::int64_t k = std::max<std::int64_t>(1, std::min<std::int64_t>(tp, local));
  std::vector<Chunk> out;
  std::int64_t first = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    const std::int64_t rows = local / k + (c < local % k ? 1 : 0);
    out.push_back({first, rows});
    first += rows;
  }
  return out;
}

// This rank's rows of the logical input x [m, h], zero-padded to `rows.local` rows.
inline int add_sp_input(Plan& plan, const SpRows& rows, std::int64_t m, std::int64_t h) {
  BufferSpec spec{"x_local", rows.local, h, BufferRole::input, {"x"}, {rows.real}, {}};
  spec.part_windows.push_back({m, h, std::min(rows.row0, m), 0});
  return plan.add_buffer(std::move(spec));
}

inline View rows_of(View v, std::int64_t row0, std::int64_t rows) {
  v.row0 += row0;
  v.rows = rows;
  return v;
}

// Chunk c's rows of a gathered (or to-be-scattered) buffer [tp * local, cols].
inline View gathered_rows(const Plan& plan, int buffer, const Chunk& c, int tp) {
  return rows_of(whole(plan, buffer), tp * c.first, tp * c.rows);
}

// overlap, column half: every chunk of x [local, h] all-gathered into xg on lane 1, then on
// lane 0 each chunk's column GEMM into y once its own gather is done (all-gather-matmul).
inline void add_gathered_column_gemms(Plan& p, const std::vector<Chunk>& chunks, int tp, int x,
                                      int xg, const std::string& gemm_label, View weight, int y,
                                      View bias) {
  std::vector<int> gathers;
  for (const auto& c : chunks) {
    gathers.push_back(
        p.add_step(AllGatherRowsStep{"all_gather_x_chunk", rows_of(whole(p, x), c.first, c.rows),
                                     gathered_rows(p, xg, c, tp)},
                   1));
  }
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    p.add_step(GemmStep{gemm_label, gathered_rows(p, xg, chunks[i], tp), weight,
                        gathered_rows(p, y, chunks[i], tp), bias},
               0, {gathers[i]});
  }
}

// overlap, row half: on lane 0 each chunk's row GEMM (input rows from `input_of`) into z, each
// followed on lane 1 by its reduce-scatter into this rank's rows of o (matmul-reduce-scatter).
// Returns the last reduce-scatter's step, for what waits on the whole result.
template <class InputOf>
int add_scattered_row_gemms(Plan& p, const std::vector<Chunk>& chunks, int tp, InputOf input_of,
                            const std::string& gemm_label, View weight, int z, View bias,
                            const std::string& scatter_label, int o) {
  int last = -1;
  for (const auto& c : chunks) {
    const int g =
        p.add_step(GemmStep{gemm_label, input_of(c), weight, gathered_rows(p, z, c, tp), bias});
    last = p.add_step(ReduceScatterStep{scatter_label, gathered_rows(p, z, c, tp),
                                        rows_of(whole(p, o), c.first, c.rows)},
                      1, {g});
  }
  return last;
}

// The rows a plan's reference covers: M, or (sequence parallel) M padded to a multiple of tp.
// The padding rows are the layer applied to zero input rows, as on the device (with a bias they
// are not zero), so a rank's padding rows are checked too.
inline std::int64_t padded_tokens_of(const Plan& p) { return p.tokens + p.padded_tokens; }

// The logical input x [M, h] in float64, with zero rows appended up to padded_tokens_of(p).
inline std::vector<double> reference_input(const Plan& p, const std::vector<float>& x,
                                           std::int64_t h) {
  std::vector<double> out(x.begin(), x.end());
  out.resize(static_cast<std::size_t>(padded_tokens_of(p) * h), 0.0);
  return out;
}

// What a rank's "out" holds of the full result [padded_tokens_of(p), h]: all of it, or (sequence
// parallel) its `local` rows starting at rank * local.
inline std::vector<double> rank_rows(const Plan& p, const std::vector<double>& full,
                                     std::int64_t h) {
  if (p.output_rows.find("out") == p.output_rows.end()) return full;
  const std::int64_t local = p.outputs.at("out").rows, row0 = p.shard.rank * local;
  return {full.begin() + row0 * h, full.begin() + (row0 + local) * h};
}

}  // namespace fusebench::ops::tp
