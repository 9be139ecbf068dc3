#include "cli/model_kernels.h"

#include <algorithm>
#include <cstdio>

#include "jit/base/error.h"

namespace qforge::cli {

std::vector<ModelKernel> model_kernels(const LlamaWeights& weights, std::int64_t m) {
  std::vector<ModelKernel> out;
  for (const auto& [name, layer] : weights.named_layers()) {
    const std::optional<GemmKey> key = layer->kernel_key(m);
    if (!key) continue;
    auto it =
        std::find_if(out.begin(), out.end(), [&](const ModelKernel& k) { return k.key == *key; });
    if (it == out.end()) it = out.insert(out.end(), ModelKernel{*key, {}});
    it->layers.push_back(name);
  }
  return out;
}

namespace {

// "blk.*.ffn_down" when every block's layer of that role calls it, else the names.
std::string layer_summary(const std::vector<std::string>& layers) {
  if (layers.size() == 1) return layers.front();
  const auto role = [](const std::string& name) {
    const std::size_t dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(dot + 1);
  };
  for (const std::string& name : layers)
    if (role(name) != role(layers.front()) || name.rfind("blk.", 0) != 0)
      return layers.front() + " and " + std::to_string(layers.size() - 1) + " more";
  return "blk.*." + role(layers.front());
}

}  // namespace

void print_model_kernels(const std::vector<ModelKernel>& kernels, std::int64_t m) {
  std::printf("%zu distinct kernels for M = %lld\n", kernels.size(), static_cast<long long>(m));
  std::printf("%-64s %7s %7s %6s  %s\n", "kernel", "N", "K", "layers", "called by");
  for (const ModelKernel& k : kernels)
    std::printf("%-64s %7lld %7lld %6zu  %s\n", kernel_name(k.key).c_str(),
                static_cast<long long>(k.key.n), static_cast<long long>(k.key.k), k.layers.size(),
                layer_summary(k.layers).c_str());
}

GemmKey model_layer_key(const LlamaWeights& weights, const std::string& name, std::int64_t m) {
  std::string names;
  for (const auto& [layer_name, layer] : weights.named_layers()) {
    const std::optional<GemmKey> key = layer->kernel_key(m);
    if (key && (layer_name == name || kernel_name(*key) == name)) return *key;
    if (names.size() < 200) names += (names.empty() ? "" : ", ") + layer_name;
  }
  fail("--layer '", name, "': no quantized layer or kernel of that name (layers: ", names,
       ", ...; f32/bf16 layers run on oneDNN and have no kernel)");
}

}  // namespace qforge::cli
