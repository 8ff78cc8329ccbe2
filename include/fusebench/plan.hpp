#pragma once
// A plan is what one variant of one op does, written as data: the buffers it owns and the steps
// it runs. The cost model prices a plan, a backend executes it, the verifier checks its outputs.
// Keeping the three apart over one description means "3 GEMMs vs 1" is stated exactly once.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "fusebench/activation.hpp"
#include "fusebench/dtype.hpp"
#include "fusebench/quant.hpp"
#include "fusebench/shapes.hpp"

namespace fusebench {

enum class BufferRole {
  input,   // activations, filled with fresh random data
  weight,  // parameters (biases too, as [N, 1] columns), filled with fresh random data
  output,  // written by the plan
};

// A row-major matrix owned by the plan. Inputs and weights are built from named logical
// tensors stacked along rows (a fused weight is [w_q; w_k; w_v], a fused bias [b_q; b_k; b_v]
// as an [N, 1] column), so split and fused variants see bit-identical data.
struct BufferSpec {
  std::string name;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  BufferRole role = BufferRole::output;
  std::vector<std::string> parts;  // logical tensors, stacked by rows (inputs/weights)
  std::vector<std::int64_t> part_rows;
  // Optional, one per part: the part is a window of a larger logical tensor (a tensor-parallel
  // rank's shard of an unsharded weight), so every rank's data are slices of the same tensor and
  // the sharded pipeline can be checked against the unsharded one. Empty: whole tensors.
  struct Window {
    std::int64_t logical_rows = 0, logical_cols = 0;  // shape of the whole logical tensor
    std::int64_t row0 = 0, col0 = 0;                  // where the part [part_rows, cols] starts
  };
  std::vector<Window> part_windows;
  // The parts (all of the same rows) interleaved row by row instead of stacked: row i of part p
  // is buffer row i * parts + p (gpt-oss's w13: gate, up, gate, up, ...).
  bool interleave_parts = false;
  // Quantized plans (docs/quant.md): what one element is. codes: one byte (fp8 e4m3fn or int8);
  // scales: fp32; plan_dtype: the plan's dtype.
  enum class Store { plan_dtype, codes, scales };
  Store store = Store::plan_dtype;
  // A codes buffer of weights quantized at load: each part quantized with `kind` scales, the
  // parts merged by `fusion`, the scales written to buffer `scales`. A scales buffer with parts
  // and no codes: the one static scale of those parts (calibrated on them, amax / qmax).
  struct Quantized {
    QuantDType dtype = QuantDType::fp8_e4m3fn;
    ScaleKind kind = ScaleKind::tensor;
    ShardFusion fusion = ShardFusion::stack;
    int scales = -1;
  };
  std::optional<Quantized> quantized{};
};

// A rectangular window of a buffer; its leading dimension is the buffer's column count, so a
// column slice of a fused output is a view, never a copy.
struct View {
  int buffer = -1;
  std::int64_t row0 = 0;
  std::int64_t col0 = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// y[M,N] = x[M,K] * w[N,K]^T (+ bias[N] on every row), the F.linear convention. The bias, when
// present (bias.buffer >= 0), is an [N, 1] view and is added by the GEMM itself (cuBLASLt's bias
// epilogue: no extra launch).
struct GemmStep {
  std::string label;
  View x, w, y;
  View bias{};
  bool has_bias() const { return bias.buffer >= 0; }
};
// Several independent GEMMs issued as one launch (grouped or strided-batched).
struct GroupedGemmStep {
  std::string label;
  std::vector<GemmStep> gemms;
  bool batched = false;  // all members the same shape: strided-batched instead of grouped
};
// y += bias (an [N, 1] view) on every row of y, for every member, in one launch: the separate
// kernel a GEMM without a bias epilogue needs (cuBLAS's grouped GEMM has none).
struct BiasAddStep {
  struct Member {
    View y, bias;
  };
  std::string label;
  std::vector<Member> members;
};
// out = act(gate) * up, elementwise (vLLM's SiluAndMul, GeluAndMul, SwigluOAIAndMul). With
// col_stride 2, gate and up are every other column of one buffer (gpt-oss's interleaved w13):
// element c of a row sits at column col0 + 2c.
struct ActAndMulStep {
  std::string label;
  View gate, up, out;
  Activation act = Activation::silu;
  double limit = 0;  // swigluoai clamp
  std::int64_t col_stride = 1;
};
using SiluMulStep = ActAndMulStep;  // the name before activations other than SiLU
// Sums `data` over the communicator's ranks, in place.
struct AllReduceStep {
  std::string label;
  View data;
};
// Concatenates every rank's `src` along columns into `dst` (rank r owns columns
// [r*src.cols, (r+1)*src.cols)).
struct AllGatherStep {
  std::string label;
  View src, dst;
};

// Sequence parallel (docs/tp.md). Row collectives: rank r owns rows [r*m, (r+1)*m) of the full
// [n*m, cols] tensor, so both are one contiguous NCCL call with nccl-tests' sizes.
// Sums every rank's `src` ([n*m, cols]) and leaves rank r's rows of the sum in `dst` ([m, cols]).
struct ReduceScatterStep {
  std::string label;
  View src, dst;
};
// Concatenates every rank's `src` ([m, cols]) along rows into `dst` ([n*m, cols]).
struct AllGatherRowsStep {
  std::string label;
  View src, dst;
};
// Expert parallelism's all-to-all (DeepEP-style dispatch and combine, docs/tp.md): src's rows,
// grouped by destination rank in rank order (send_rows[d] of them for rank d), go to rank d, whose
// dst holds the rows it receives grouped by source rank (recv_rows[s] from rank s). The counts
// are host data fixed when the plan is built from its routing; src and dst may hold more rows.
struct AllToAllRowsStep {
  std::string label;
  View src, dst;
  std::vector<std::int64_t> send_rows, recv_rows;  // one per rank
};
// out = x / sqrt(mean(x^2 over the row) + eps) * weight, row by row (weight is [1, cols]).
struct RmsNormStep {
  std::string label;
  View x, weight, out;
  float eps = 1e-6f;
};

// A quantized matrix in a plan: a codes view and the whole scales buffer of its scale grid.
struct QuantView {
  View codes;
  int scales = -1;
  ScaleKind kind = ScaleKind::tensor;
};
// Quantizes x (the plan's dtype) into codes and scales: dynamic (each tile's amax / qmax, the
// scales written) or static (the scales buffer holds the given scale, only read).
struct QuantizeStep {
  std::string label;
  View x;
  QuantView out;
  QuantDType dtype = QuantDType::fp8_e4m3fn;
  bool static_scale = false;
};
// y[M,N] = (x codes * x scales) (w codes * w scales)^T, accumulated in fp32, y in the plan's
// dtype: one scaled GEMM (cuBLASLt's FP8 matmul with scale modes; emulated on the CPU).
struct ScaledGemmStep {
  std::string label;
  QuantView x, w;
  View y;
  QuantDType dtype = QuantDType::fp8_e4m3fn;
};
// Several independent scaled GEMMs issued as one launch (the quantized moe's grouped and padded
// stages: vLLM's fused_moe kernel on FP8/INT8 codes). A member's x codes may be a row window of
// a codes buffer (its scales the window's rows: per tensor, per token or per 1x128 group).
struct GroupedScaledGemmStep {
  std::string label;
  std::vector<ScaledGemmStep> gemms;
  bool batched = false;  // all members the same shape (padded's blocks)
};
// MoE routing as steps (the moe op): the indices are host data the plan carries, fixed when the
// plan is built from its routing.
// dst row i = src row rows[i] (rows[i] < 0: a zero row, the padding of a block), one launch;
// with `scale` (one per dst row), dst row i = scale[i] * src row rows[i] (Llama-4's router
// weight applied to the expert's input, apply_router_weight_on_input).
struct GatherRowsStep {
  std::string label;
  View src, dst;
  std::vector<std::int64_t> rows;  // one per dst row
  std::vector<float> scale{};      // empty: a plain copy
};
// dst row rows[i] += scale[i] * src row i for every i with rows[i] >= 0, one launch; with
// zero_dst, dst is zeroed first (the combine of a block without a shared expert to add onto).
struct ScatterAddStep {
  std::string label;
  View src, dst;
  std::vector<std::int64_t> rows;  // one per src row
  std::vector<float> scale;        // one per src row
  bool zero_dst = false;
};

// x row t *= sigmoid(gate row t), in place; gate is an [M, 1] view (qwen2_moe's gated shared
// expert: sigmoid(x . shared_expert_gate) times the shared expert's output), one launch.
struct SigmoidGateRowsStep {
  std::string label;
  View x, gate;
};

using Step = std::variant<GemmStep, GroupedGemmStep, ActAndMulStep, BiasAddStep, AllReduceStep,
                          AllGatherStep, ReduceScatterStep, AllGatherRowsStep, RmsNormStep,
                          QuantizeStep, ScaledGemmStep, GroupedScaledGemmStep, GatherRowsStep,
                          ScatterAddStep, SigmoidGateRowsStep, AllToAllRowsStep>;

// True for the steps a Communicator executes.
bool is_collective(const Step& step);

// Where a step runs (docs/tp.md "Concurrency"). Steps of one lane run in plan order; a step also
// waits until every step in `after` has completed. Lane 0 is the backend's stream (the calling
// thread on the CPU); lane 1 a second stream (a communication thread of the workspace on the
// CPU), so communication on lane 1 overlaps compute on lane 0.
struct StepOrder {
  int lane = 0;
  std::vector<int> after;  // indices of earlier steps
};
inline constexpr int kLanes = 2;

// Rows [row0, row0 + rows) of the op's full result held by a row-sharded output (a sequence-
// parallel rank's); the output's remaining rows are padding and hold zeros.
struct RowWindow {
  std::int64_t row0 = 0, rows = 0;
};

struct MoeRouting;  // routing.hpp

struct Plan {
  std::string op;
  std::string variant;
  std::int64_t tokens = 0;
  DType dtype = DType::bf16;
  ShardShape shard;
  std::vector<BufferSpec> buffers;
  std::vector<Step> steps;
  std::map<std::string, View> outputs;  // named results compared across variants
  // One entry per step, or empty: every step on lane 0, in order (no concurrency).
  std::vector<StepOrder> order;
  // Sequence-parallel plans pad M to a multiple of tp: rows computed beyond the real tokens.
  std::int64_t padded_tokens = 0;
  // Outputs that hold only some rows of the full result (absent: the whole result).
  std::map<std::string, RowWindow> output_rows;
  // Quantized plans: the spec, and the outputs whose quantization error the report states (the
  // projections: q, k, v or gate, up), in order.
  std::optional<QuantSpec> quant;
  std::vector<std::string> quant_outputs;
  // The moe op's routing (every variant of one shape built from the same one) and padding; null
  // for the other ops.
  std::shared_ptr<const MoeRouting> moe;

  int add_buffer(BufferSpec spec);
  // Appends a step on `lane` after the steps `after`; returns its index. Keeps `order` one per
  // step once any step leaves lane 0 or waits.
  int add_step(Step step, int lane = 0, std::vector<int> after = {});
  const StepOrder& order_of(std::size_t step) const;
  bool has_collectives() const;
  // Throws std::logic_error when `order` is malformed (a lane out of range, a wait on a later
  // step, or not one entry per step).
  void check_order() const;
  // Checked (checked_size.hpp): throw SizeOverflow, naming the plan and the buffer, past 2^63-1.
  std::size_t buffer_bytes(int index) const;
  std::size_t total_bytes() const;
  // "qkv/fused at --tokens=M (dtype d)", for size messages.
  std::string size_context() const;
};

}  // namespace fusebench
