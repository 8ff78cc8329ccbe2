// Written from vLLM's weight loaders (model_executor/layers/linear.py), not from fusebench's
// plans, so the test comparing the two can fail.
#include "fusebench/tp_narrowing.hpp"

#include <stdexcept>

namespace fusebench {

RankNarrowing vllm_narrowing(const ModelShape& model, int tp, int rank) {
  (void)shard(model, tp);  // the divisibility rules and their messages
  if (rank < 0 || rank >= tp) {
    throw std::invalid_argument("rank " + std::to_string(rank) +
                                " is outside tp=" + std::to_string(tp));
  }
  const std::int64_t d = model.head_dim, h = model.hidden;
  const std::int64_t total_q = model.heads * d, total_kv = model.kv_heads * d;
  // QKVParallelLinear.__init__
  const std::int64_t num_heads = model.heads / tp;
  std::int64_t num_kv_heads = 0, num_kv_head_replicas = 0;
  if (tp >= model.kv_heads) {
    num_kv_heads = 1;
    num_kv_head_replicas = tp / model.kv_heads;
  } else {
    num_kv_heads = model.kv_heads / tp;
    num_kv_head_replicas = 1;
  }
  RankNarrowing n;
  // QKVParallelLinear.weight_loader, loaded_shard_id "q" / "k" / "v".
  const std::int64_t q_size = num_heads * d, kv_size = num_kv_heads * d;
  const std::int64_t kv_rank = rank / num_kv_head_replicas;
  n.qkv_proj = {
      {"w_q", total_q, h, 0, 0, q_size, rank * q_size},
      {"w_k", total_kv, h, 0, q_size, kv_size, kv_rank * kv_size},
      {"w_v", total_kv, h, 0, q_size + kv_size, kv_size, kv_rank * kv_size},
  };
  // MergedColumnParallelLinear.weight_loader, shard ids 0 (gate) and 1 (up) of output_sizes
  // [intermediate, intermediate].
  const std::vector<std::int64_t> output_sizes = {model.intermediate, model.intermediate};
  const char* names[] = {"w_gate", "w_up"};
  std::int64_t offset = 0;
  for (std::size_t id = 0; id < output_sizes.size(); ++id) {
    const std::int64_t shard_offset = offset / tp, shard_size = output_sizes[id] / tp;
    n.gate_up_proj.push_back(
        {names[id], model.intermediate, h, 0, shard_offset, shard_size, rank * shard_size});
    offset += output_sizes[id];
  }
  // RowParallelLinear.weight_loader: input_dim 1, shard_size = input_size_per_partition.
  n.o_proj = {{"w_o", h, total_q, 1, 0, total_q / tp, rank * (total_q / tp)}};
  const std::int64_t i_part = model.intermediate / tp;
  n.down_proj = {{"w_down", h, model.intermediate, 1, 0, i_part, rank * i_part}};
  return n;
}

}  // namespace fusebench
