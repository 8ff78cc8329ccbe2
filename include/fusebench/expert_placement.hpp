#pragma once
// Where the experts of an MoE layer live under expert parallelism (issue 40, docs/tp.md "The MoE
// block across ranks"): vLLM's determine_expert_map (linear or round_robin), DeepSeek's EPLB
// (redundant experts: the hottest replicated, the replicas packed to balance the ranks, as vLLM's
// --enable-eplb places them), which replica each routed slot goes to, and what that gives every
// rank: its routed rows, its experts, and the imbalance. Pure host code.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fusebench/routing.hpp"

namespace fusebench {

enum class PlacementStrategy { linear, round_robin };
std::string_view to_string(PlacementStrategy s);
// "linear" | "round_robin"; throws std::invalid_argument naming the value and the valid ones.
PlacementStrategy parse_placement(std::string_view value);

// Physical experts (slots of the ranks' weight buffers) and the logical expert each holds.
struct ExpertPlacement {
  std::string strategy;  // linear | round_robin | eplb
  int ranks = 0;
  std::int64_t experts = 0;    // logical
  std::int64_t redundant = 0;  // physical - logical
  // Per physical expert p: the logical expert it holds and its rank. A rank's physical experts
  // are listed in its local order (vLLM's expert_map: logical -> local index).
  std::vector<std::int64_t> logical_of;
  std::vector<int> rank_of;
  // Per logical expert: its replicas (physical ids), in ascending order.
  std::vector<std::vector<std::int64_t>> replicas;

  std::int64_t physical() const { return static_cast<std::int64_t>(logical_of.size()); }
  // Physical experts on `rank`, in local order.
  std::vector<std::int64_t> on_rank(int rank) const;
};

// vLLM's determine_expert_map for every rank at once: E/ranks experts each, the first E % ranks
// ranks one more; linear: rank r holds a contiguous range; round_robin: experts r, r + ranks, ...
// Throws std::invalid_argument naming the value when ranks < 1 or experts < ranks.
ExpertPlacement place_experts(std::int64_t experts, int ranks, PlacementStrategy strategy);

// DeepSeek's EPLB (eplb.py, the global policy: one group per node), as vLLM's --enable-eplb runs
// it: `redundant` extra replicas, each given in turn to the logical expert with the largest load
// per replica (replicate_experts); then the physical experts, heaviest load per replica first,
// packed onto the ranks, each to the least loaded rank that still has room, every rank holding
// (E + redundant) / ranks of them (balanced_packing). `load` is tokens per logical expert.
// Throws std::invalid_argument when (E + redundant) is not a multiple of ranks (vLLM's rule),
// naming both, or redundant < 0.
ExpertPlacement eplb_placement(const std::vector<std::int64_t>& load, int ranks,
                               std::int64_t redundant);

// The physical expert each routed slot goes to: slot s of logical expert e to replica
// s mod replicas(e) (a deterministic spread of each expert's slots over its replicas, as vLLM's
// EPLB maps by position in topk_ids); without redundancy the one replica.
std::vector<std::int64_t> physical_of_slots(const RoutingAssignment& a, const ExpertPlacement& p);

// What the placement gives every rank on one routing.
struct RankLoad {
  std::vector<std::int64_t> rows;            // routed rows (slots) per rank
  std::vector<std::int64_t> experts;         // physical experts held per rank
  std::vector<std::int64_t> active_experts;  // of those, with a row
  std::vector<std::int64_t> tokens;          // distinct tokens with a slot there (a2a's rows)
  double mean_rows = 0;
  double imbalance = 0;  // max rows / mean rows (1: balanced; TensorRT-LLM's imbalance + 1)
  int slowest = 0;       // the rank with the most rows (lowest rank on a tie)
};
RankLoad rank_load(const RoutingAssignment& a, const ExpertPlacement& p);
// {strategy, ranks, experts, redundant, rows_per_rank, experts_per_rank, active_experts_per_rank,
// tokens_per_rank, mean_rows, imbalance, slowest_rank}, for the entry.
nlohmann::json rank_load_json(const RankLoad& load, const ExpertPlacement& p);

}  // namespace fusebench
