#pragma once
// The gated activations of the MLPs vLLM runs (vllm/model_executor/layers/activation.py):
// out = act(gate) * up, elementwise over the two halves of the gate/up output.
#include <string_view>

namespace fusebench {

enum class Activation {
  silu,       // SiluAndMul: silu(g) * u (Llama, Qwen, Mistral, Mixtral, DeepSeek)
  gelu_tanh,  // GeluAndMul(approximate="tanh"): Gemma
  gelu,       // GeluAndMul(approximate="none"): Gemma with hidden_activation "gelu"
  swigluoai,  // SwigluOAIAndMul: (clamp(u, -l, l) + 1) * g' * sigmoid(1.702 g'), g' = min(g, l)
};

// The name used in reports: "silu", "gelu_tanh", "gelu", "swigluoai".
std::string_view to_string(Activation a);

// SwigluOAIAndMul's fixed slope (vLLM's default, as gpt-oss uses it).
inline constexpr double kSwigluOaiAlpha = 1.702;

}  // namespace fusebench
