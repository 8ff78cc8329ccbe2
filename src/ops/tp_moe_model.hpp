#pragma once
// The cost model's prediction for the MoE block across ranks (tp_moe, docs/tp.md): every rank's
// plan priced by the roofline on stated nominal ceilings, its collectives by the link model; the
// pipeline is the slowest rank's compute plus the collectives. Modelled, and labelled so.
#include <nlohmann/json.hpp>
#include <vector>

#include "fusebench/cost_model.hpp"
#include "fusebench/link_model.hpp"
#include "fusebench/plan.hpp"

namespace fusebench::ops {

// What the prediction assumes: one H200 SXM per rank (989 TFLOP/s dense bf16, 4.8 TB/s HBM3e,
// NVIDIA's data sheet) and the nvlink-h200 link profile (docs/tp.md), launch overhead left out.
Ceilings tp_moe_nominal_ceilings();
LinkProfile tp_moe_nominal_link();

// {source, ceilings, link, compute_seconds_per_rank, slowest_rank, imbalance (max / mean of the
// ranks' compute), wait_fraction, comm_seconds, pipeline_seconds, collectives_per_rank (kind,
// bytes, wire_bytes, seconds per call)} from every rank's plan (rank r's at index r).
nlohmann::json predict_across_ranks(const std::vector<Plan>& rank_plans, const Ceilings& ceilings,
                                    const LinkProfile& link);

}  // namespace fusebench::ops
