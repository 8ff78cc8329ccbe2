#pragma once
// Materialises a plan on a backend: allocates its buffers, fills inputs and weights with fresh
// random data (or weights from a checkpoint), and executes its steps.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusebench/backend.hpp"
#include "fusebench/ops.hpp"
#include "fusebench/plan.hpp"

namespace fusebench {

class Communicator;

// Deterministic values of a logical tensor, rounded to dtype: uniform in [-1, 1) scaled by
// 1/sqrt(cols) for weights so outputs stay O(1). Never all zero. Seeded by (seed, name).
std::vector<float> logical_tensor(const std::string& name, std::int64_t rows, std::int64_t cols,
                                  BufferRole role, DType dtype, std::uint64_t seed);
// Rows [row0, row0+rows) x columns [col0, col0+cols) of the logical tensor
// [logical_rows, logical_cols]: the same values logical_tensor gives there, without the rest.
std::vector<float> logical_window(const std::string& name, std::int64_t logical_rows,
                                  std::int64_t logical_cols, std::int64_t row0, std::int64_t col0,
                                  std::int64_t rows, std::int64_t cols, BufferRole role,
                                  DType dtype, std::uint64_t seed);

// One window of a logical tensor, as a plan asks for it.
struct WindowRequest {
  std::string name;  // logical tensor: "w_q", "x", ...
  BufferRole role = BufferRole::weight;
  std::int64_t logical_rows = 0, logical_cols = 0;  // the whole tensor's shape
  std::int64_t row0 = 0, col0 = 0, rows = 0, cols = 0;
  DType dtype = DType::f32;  // what the values will be rounded to
};

// Where the values of logical tensors come from: the seeded generator (RandomTensors) or a
// checkpoint's layer (HfLayerWeights, hf_layer.hpp).
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool has(const std::string& name) const = 0;
  // The window's values before rounding to request.dtype (encode() rounds them for the device,
  // logical_inputs() for the reference). Throws when the source lacks the tensor, its shape is not
  // [logical_rows, logical_cols], or a value does not fit request.dtype.
  virtual std::vector<float> window(const WindowRequest& request) const = 0;
  // Says what the values are, for messages and reports ("random (seed 7)", a checkpoint).
  virtual std::string describe() const = 0;
  // A quantized checkpoint's stored codes and scales of a weight window (window() then gives their
  // dequantized values); nullopt where the source stores no quantized values.
  virtual std::optional<QuantMat> stored_quantized(const WindowRequest&) const {
    return std::nullopt;
  }
  // The stored static input scale of the layer holding weight `name` (input_scale), or nullopt.
  virtual std::optional<float> stored_input_scale(const std::string&) const { return std::nullopt; }
};

// Every tensor from the counter-based generator that logical_window() rounds.
class RandomTensors : public TensorSource {
 public:
  explicit RandomTensors(std::uint64_t seed) : seed_(seed) {}
  bool has(const std::string&) const override { return true; }
  std::vector<float> window(const WindowRequest& request) const override;
  std::string describe() const override;

 private:
  std::uint64_t seed_;
};

// The rounded values of the logical tensors a plan reads (what the float64 reference sees):
// weights from `weights` when given, everything else from the generator seeded by `seed`. Whole
// tensors (the TP pipelines' references need the unsharded layer), or, with `windows_only`, just
// the window of each that the plan holds (what the qkv and gate_up references need; the whole of
// a 70B MLP weight would not fit a host's verification).
LogicalTensors logical_inputs(const Plan& plan, std::uint64_t seed,
                              const TensorSource* weights = nullptr, bool windows_only = false);

// What quantized weight buffer `b` holds when `weights` stores its parts quantized (a quantized
// checkpoint): each part's stored codes and scales, merged by the buffer's fusion as vLLM merges
// shards (stack, requantize_with_max_scale, convert_to_channelwise). nullopt when the source
// stores none of them (the plan then quantizes the rounded values: quantize_shards). Throws
// std::invalid_argument when the stored scales are not the buffer's kind or dtype.
std::optional<QuantMat> stored_quantized_buffer(const Plan& plan, const BufferSpec& b,
                                                const TensorSource* weights);
// A static plan's input scale from a quantized checkpoint: the largest stored input_scale of the
// weights the plan quantizes (vLLM's fused layers take the max of their shards'); nullopt when
// the source stores none.
std::optional<float> stored_static_scale(const Plan& plan, const TensorSource* weights);

class Workspace {
 public:
  // Inputs from the generator seeded by `seed`; weights from `weights` when given (e.g. a
  // checkpoint's layer; used only while constructing), else from the same generator.
  Workspace(Backend& backend, Plan plan, std::uint64_t seed, const TensorSource* weights = nullptr);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  const Plan& plan() const { return plan_; }
  // True when a step of the plan runs on lane 1 (communication that can overlap compute).
  bool uses_second_lane() const { return uses_lane1_; }
  Backend& backend() { return backend_; }
  // Issues every step once (asynchronously on GPU backends). Collective steps need `comm`.
  void run(Communicator* comm = nullptr) { run_on(buffers_, comm); }
  // The same steps on other buffers of the same sizes (one pointer per plan buffer, e.g. a
  // cache-rotation copy of this workspace's): the one place a plan's steps are executed.
  // Lanes (plan.hpp StepOrder): on a backend with device lanes each step is issued on its lane's
  // stream, cross-lane waits become device events, and lane 1 forks from lane 0 at the start and
  // joins it at the end (so timers and synchronisation on lane 0 cover the whole run). Otherwise
  // lane 1 runs on this workspace's communication thread while the calling thread runs lane 0;
  // the call returns when both are done, and rethrows the first failure of either.
  void run_on(std::span<void* const> buffers, Communicator* comm = nullptr);
  // Each step's seconds when run alone, in plan order: `runs` runs of the plan with the backend's
  // timer around every step (so a GPU backend waits after each), each step's median. What a
  // step profile reports (which step kind dominates); the steps of a plan with collectives need
  // every rank, so such a plan is refused (std::invalid_argument).
  std::vector<double> time_steps(int runs);
  MatRef ref(const View& view) const { return ref_in(buffers_, view); }
  // A view of `buffers` (laid out as this plan's buffers).
  MatRef ref_in(std::span<void* const> buffers, const View& view) const;
  // Copies a view back to the host as floats (synchronises).
  std::vector<float> read(const View& view);
  std::size_t bytes() const { return plan_.total_bytes(); }
  // Collective steps run() has handed to a communicator on the calling thread, ever. The CPU
  // launch counter counts them as calls (each is one kernel on the GPU, as the model says).
  static std::int64_t collectives_issued_on_this_thread();

 private:
  struct LaneThread;
  void execute(const Step& step, std::span<void* const> buffers, Communicator* comm);
  QuantRef qref(std::span<void* const> buffers, const QuantView& q, QuantDType dtype) const;
  // Writes a quantized weight's codes and scales (or a static scale) from its parts.
  void fill_quantized(int index, const RandomTensors& random, const TensorSource* weights);
  void run_device_lanes(std::span<void* const> buffers, Communicator* comm);
  void run_thread_lanes(std::span<void* const> buffers, Communicator* comm);

  Backend& backend_;
  Plan plan_;
  std::vector<void*> buffers_;
  bool uses_lane1_ = false;
  std::vector<char> signalled_;  // steps another lane waits for (device lanes record an event)
  std::int64_t collective_steps_ = 0;
  std::size_t max_message_bytes_ = 0;        // Communicator::reserve
  std::unique_ptr<LaneThread> lane_thread_;  // CPU: runs lane 1; made on the first run
};

}  // namespace fusebench
