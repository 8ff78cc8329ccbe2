#pragma once
// Checkpoint tensor names as the layer tables write them: "{layer}" and "{expert}" stand for the
// decoder layer and the routed expert. Internal to src/weights.
#include <string>

namespace fusebench {

// `text` with every `key` replaced by `value`.
inline std::string substitute(std::string text, const std::string& key, const std::string& value) {
  for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

}  // namespace fusebench
