// The f32 executor against a float64 Llama forward written out here, on tiny GGUF models
// with each head layout (one kv head per head, GQA groups of 2, one kv head for all) and
// pools of 1-3 threads, so a group's heads are also split across threads. Head size 128
// makes an attention block 32 positions (llama_executor.cpp), so the 70 positions span
// three blocks, the last one partial. A batched prompt, then token-by-token decode:
// every position's logits. Weights uniform in [-1, 1] make scores tens of units apart, so
// float rounding reaches about 2e-4 of the largest logit; a wrong kv head or block is O(1).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/runtime/dense_linear.h"
#include "model/runtime/llama_executor.h"
#include "model/runtime/model_loader.h"
#include "tests/model/tiny_llama.h"

namespace qforge {
namespace {

using Weights = std::map<std::string, std::vector<float>>;
using Vector = std::vector<double>;

// y = W x, W rows x columns row-major.
Vector matvec(const std::vector<float>& w, const Vector& x, std::size_t rows) {
  Vector y(rows, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < x.size(); ++i) y[r] += double(w[r * x.size() + i]) * x[i];
  return y;
}

Vector rmsnorm(const Vector& x, const std::vector<float>& weight, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / double(x.size()) + eps);
  Vector y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = double(weight[i]) * x[i] * inv;
  return y;
}

// How a model rotates: the first `dims` dimensions of each head (0: all), in adjacent
// pairs (2p, 2p+1) or split halves (p, p + dims/2), pair p turning by
// pos * scale * theta^(-2p / dims) / factors[p].
struct Rotary {
  int dims = 0;
  bool halves = false;
  double scale = 1.0;
  std::vector<float> factors;
};

void rope(Vector& v, int head_dim, int pos, double theta, const Rotary& r = {}) {
  const int dims = r.dims > 0 ? r.dims : head_dim;
  for (std::size_t h = 0; h < v.size(); h += std::size_t(head_dim))
    for (int p = 0; p < dims / 2; ++p) {
      double angle = pos * r.scale * std::pow(theta, -2.0 * p / dims);
      if (!r.factors.empty()) angle /= r.factors[std::size_t(p)];
      const std::size_t i = h + std::size_t(r.halves ? p : 2 * p);
      const std::size_t j = r.halves ? i + std::size_t(dims / 2) : i + 1;
      const double a = v[i], b = v[j];
      v[i] = a * std::cos(angle) - b * std::sin(angle);
      v[j] = a * std::sin(angle) + b * std::cos(angle);
    }
}

// v += bias when the model has one.
void add_bias(Vector& v, const Weights& w, const std::string& name) {
  const auto it = w.find(name);
  if (it == w.end()) return;
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += double(it->second[i]);
}

// How the cache rounds what a position reads (none: exact).
// absmax / 127 rounded to f16 (the compiler's _Float16 conversion), as the int8 cache
// keeps its scales.
double f16_scale(double absmax) {
  return double(static_cast<_Float16>(absmax / 127));
}

struct CacheRounding {
  // Each cached kv head's row (head_dim values), as it is stored.
  void (*row)(double*, int) = nullptr;
  // KIVI (int8): a query reads the rows of the groups of `group` positions before its own
  // as `group_keys` / `group_values` round them (rows of the group, head_dim apart, one
  // kv head), its own group's rows exactly.
  int group = 0;
  void (*group_keys)(double*, int rows, int n) = nullptr;
  void (*group_values)(double*, int rows, int n) = nullptr;
  // And q . k of those keys as an integer sum (vector_kernels.h: dot_rows_int8_keys): q
  // times the group's channel scales s, rounded to int8 with t = max|q s| / 127, against
  // the keys' integers k / s: t * sum_c round(q_c s_c / t) round(k_c / s_c) (s: f16).
  bool integer_scores = false;
};

// That integer q . k of one kv head's keys, rows `first`.. of a rounded group of `count`.
double integer_score(const double* q, const std::vector<Vector>& keys, std::size_t offset,
                     int first, int count, int p, int head_dim) {
  double t = 0, dot = 0;
  std::vector<double> s(std::size_t(head_dim), 0.0);
  for (int c = 0; c < head_dim; ++c) {
    for (int r = first; r < first + count; ++r)
      s[c] = std::max(s[c], std::fabs(keys[std::size_t(r)][offset + c]));
    s[c] = f16_scale(s[c]);
    t = std::max(t, std::fabs(q[c] * s[c]) / 127);
  }
  for (int c = 0; c < head_dim; ++c) {
    if (s[c] == 0 || t == 0) continue;
    dot += std::nearbyint(q[c] * s[c] / t) * std::round(keys[std::size_t(p)][offset + c] / s[c]);
  }
  return t * dot;
}

// Logits of every position of `tokens`, each position seeing positions 0..itself,
// through a cache that rounds as `rounding` says.
std::vector<Vector> reference_logits(const Weights& w, const test::TinyLlama& m,
                                     const std::vector<int>& tokens,
                                     const CacheRounding& rounding = {},
                                     const Rotary& rotary = {}) {
  const int head_dim = m.dim / m.n_heads, group = m.n_heads / m.n_kv_heads;
  const std::size_t dim = std::size_t(m.dim), kv_dim = std::size_t(head_dim * m.n_kv_heads);
  auto t = [&](int l, const char* role) -> const std::vector<float>& {
    return w.at(layer_tensor_name(l, role));
  };
  std::vector<std::vector<Vector>> keys(std::size_t(m.n_layers)), values(keys.size());
  // KIVI: the rounded rows of each group once it is complete.
  std::vector<std::vector<Vector>> rounded_keys(keys.size()), rounded_values(keys.size());
  auto round_group = [&](std::vector<Vector>& rows, std::vector<Vector>& rounded, int first,
                         void (*round)(double*, int, int)) {
    const int count = static_cast<int>(rows.size()) - first;
    for (std::size_t h = 0; h < kv_dim; h += std::size_t(head_dim)) {
      std::vector<double> block(std::size_t(count) * head_dim);
      for (int p = 0; p < count; ++p)
        std::copy_n(rows[std::size_t(first + p)].begin() + std::ptrdiff_t(h), head_dim,
                    block.begin() + std::ptrdiff_t(p) * head_dim);
      round(block.data(), count, head_dim);
      for (int p = 0; p < count; ++p)
        std::copy_n(block.begin() + std::ptrdiff_t(p) * head_dim, head_dim,
                    rounded[std::size_t(first + p)].begin() + std::ptrdiff_t(h));
    }
  };
  std::vector<Vector> out;
  for (std::size_t pos = 0; pos < tokens.size(); ++pos) {
    const std::vector<float>& embedding = w.at("token_embd.weight");
    Vector x(embedding.begin() + std::ptrdiff_t(tokens[pos] * dim),
             embedding.begin() + std::ptrdiff_t((tokens[pos] + 1) * dim));
    for (int l = 0; l < m.n_layers; ++l) {
      const Vector xn = rmsnorm(x, t(l, "attn_norm"), 1e-6);
      Vector q = matvec(t(l, "attn_q"), xn, dim), k = matvec(t(l, "attn_k"), xn, kv_dim);
      Vector v = matvec(t(l, "attn_v"), xn, kv_dim);
      add_bias(q, w, layer_bias_name(l, "attn_q"));
      add_bias(k, w, layer_bias_name(l, "attn_k"));
      add_bias(v, w, layer_bias_name(l, "attn_v"));
      rope(q, head_dim, int(pos), 500000.0, rotary);
      rope(k, head_dim, int(pos), 500000.0, rotary);
      if (rounding.row != nullptr)
        for (std::size_t h = 0; h < kv_dim; h += std::size_t(head_dim)) {
          rounding.row(k.data() + h, head_dim);
          rounding.row(v.data() + h, head_dim);
        }
      keys[l].push_back(k);
      values[l].push_back(v);
      rounded_keys[l].push_back(k);
      rounded_values[l].push_back(v);
      const int g = rounding.group, own_group = g > 0 ? int(pos) / g * g : int(pos) + 1;
      if (g > 0 && (int(pos) + 1) % g == 0) {
        round_group(keys[l], rounded_keys[l], own_group, rounding.group_keys);
        round_group(values[l], rounded_values[l], own_group, rounding.group_values);
      }
      // The rows this position reads: rounded before its own group, exact in it.
      auto key = [&](std::size_t p) -> const Vector& {
        return int(p) < own_group ? rounded_keys[l][p] : keys[l][p];
      };
      auto value = [&](std::size_t p) -> const Vector& {
        return int(p) < own_group ? rounded_values[l][p] : values[l][p];
      };
      Vector attended(dim, 0.0);
      for (int h = 0; h < m.n_heads; ++h) {
        const std::size_t qo = std::size_t(h * head_dim), ko = std::size_t(h / group * head_dim);
        Vector score(pos + 1);
        for (std::size_t p = 0; p <= pos; ++p) {
          if (rounding.integer_scores && int(p) < own_group)
            score[p] =
                integer_score(q.data() + qo, keys[l], ko, int(p) / g * g, g, int(p), head_dim);
          else
            for (int i = 0; i < head_dim; ++i) score[p] += q[qo + i] * key(p)[ko + i];
          score[p] /= std::sqrt(double(head_dim));
        }
        const double top = *std::max_element(score.begin(), score.end());
        double sum = 0;
        for (double& s : score) sum += (s = std::exp(s - top));
        for (std::size_t p = 0; p <= pos; ++p)
          for (int i = 0; i < head_dim; ++i) attended[qo + i] += score[p] / sum * value(p)[ko + i];
      }
      const Vector o = matvec(t(l, "attn_output"), attended, dim);
      for (std::size_t i = 0; i < dim; ++i) x[i] += o[i];
      const Vector xf = rmsnorm(x, t(l, "ffn_norm"), 1e-6);
      const Vector gate = matvec(t(l, "ffn_gate"), xf, std::size_t(m.hidden_dim));
      Vector up = matvec(t(l, "ffn_up"), xf, std::size_t(m.hidden_dim));
      for (std::size_t i = 0; i < up.size(); ++i) up[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
      const Vector down = matvec(t(l, "ffn_down"), up, dim);
      for (std::size_t i = 0; i < dim; ++i) x[i] += down[i];
    }
    out.push_back(matvec(w.at("output.weight"), rmsnorm(x, w.at("output_norm.weight"), 1e-6),
                         std::size_t(m.vocab)));
  }
  return out;
}

// Four heads of 128 over `kv_heads` kv heads, a context of `positions`.
test::TinyLlama attention_model(int kv_heads, int positions) {
  test::TinyLlama spec;
  spec.dim = 512;
  spec.n_heads = 4;
  spec.n_kv_heads = kv_heads;
  spec.context = positions;
  return spec;
}

// The first `prompt` tokens as one batch (every position's logits), then the rest one
// token at a time: the logits of every position.
std::vector<std::vector<float>> prompt_then_decode(LlamaExecutor& executor,
                                                   const std::vector<int>& tokens, int prompt,
                                                   int vocab) {
  std::vector<std::vector<float>> got;
  const std::span<const float> batch =
      executor.forward(std::span<const int>(tokens.data(), std::size_t(prompt)), 0, true);
  for (int p = 0; p < prompt; ++p)
    got.emplace_back(batch.begin() + p * vocab, batch.begin() + (p + 1) * vocab);
  for (int p = prompt; p < static_cast<int>(tokens.size()); ++p) {
    const std::span<const float> logits =
        executor.forward(std::span<const int>(&tokens[std::size_t(p)], 1), p);
    got.emplace_back(logits.begin(), logits.end());
  }
  return got;
}

// Every position's logits within `relative` of that position's largest reference logit.
void expect_logits_near(const std::vector<std::vector<float>>& got, const std::vector<Vector>& want,
                        double relative) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t p = 0; p < want.size(); ++p) {
    double largest = 0;
    for (double v : want[p]) largest = std::max(largest, std::fabs(v));
    ASSERT_EQ(got[p].size(), want[p].size());
    for (std::size_t i = 0; i < want[p].size(); ++i)
      ASSERT_NEAR(got[p][i], want[p][i], relative * largest) << "position " << p << " token " << i;
  }
}

TEST(AttentionReference, F32LogitsMatchFloat64ForEveryHeadLayoutAndPool) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qforge_attention_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  constexpr int kPrompt = 37, kPositions = 70;
  for (const int kv_heads : {4, 2, 1}) {
    const test::TinyLlama spec = attention_model(kv_heads, kPositions);
    const Weights weights = test::write_tiny_llama(path, spec);
    std::vector<int> tokens(kPositions);
    for (int p = 0; p < kPositions; ++p) tokens[p] = (p * 7 + 3) % spec.vocab;
    const std::vector<Vector> want = reference_logits(weights, spec, tokens);
    LoadedModel model = load_model(path, parse_precision("f32"));
    set_dense_threads(1);
    for (const int threads : {1, 2, 3}) {
      SCOPED_TRACE("kv heads " + std::to_string(kv_heads) + ", threads " + std::to_string(threads));
      ThreadPool pool(threads);
      LlamaExecutor executor(model.weights, pool);
      const std::vector<std::vector<float>> got =
          prompt_then_decode(executor, tokens, kPrompt, spec.vocab);
      expect_logits_near(got, want, 1e-3);
    }
  }
  std::filesystem::remove(path);
}

// The architectures' variations against the same float64 forward: qwen2 (Q/K/V biases,
// RoPE on split halves), partial rotary dimensions in both layouts, Llama 3.1's frequency
// factors (rope_freqs.weight) with linear RoPE scaling, and a mistral file.
TEST(AttentionReference, ArchitectureVariantsMatchFloat64) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qforge_attention_arch_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  constexpr int kPrompt = 23, kPositions = 40;
  std::vector<float> factors(64);
  for (std::size_t p = 0; p < factors.size(); ++p) factors[p] = 1.0f + 0.25f * float(p % 9);
  struct Case {
    std::string name, architecture;
    bool bias;
    int rope_dims;  // 0: the whole head
    bool halves;
    float linear_factor;  // 0: no scaling key
    bool freq_factors;
  };
  const std::vector<Case> cases = {
      {"qwen2", "qwen2", true, 0, true, 0, false},
      {"qwen2 partial rotary", "qwen2", true, 64, true, 0, false},
      {"llama partial rotary", "llama", false, 64, false, 0, false},
      {"llama 3.1 frequency factors, linear x4", "llama", false, 0, false, 4.0f, true},
      {"mistral", "mistral", false, 0, false, 0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    test::TinyLlama spec = attention_model(2, kPositions);
    spec.architecture = c.architecture;
    spec.qkv_bias = c.bias;
    const int dims = c.rope_dims > 0 ? c.rope_dims : 128;
    if (c.freq_factors) spec.rope_freqs.assign(factors.begin(), factors.begin() + dims / 2);
    spec.edit_metadata = [&](GgufWriter& w) {
      if (c.rope_dims > 0)
        w.add(c.architecture + ".rope.dimension_count",
              GgufValue::u32(static_cast<std::uint32_t>(c.rope_dims)));
      if (c.linear_factor > 0) {
        w.add(c.architecture + ".rope.scaling.type", GgufValue::string("linear"));
        w.add(c.architecture + ".rope.scaling.factor", GgufValue::f32(c.linear_factor));
      }
    };
    const Weights weights = test::write_tiny_llama(path, spec);
    Rotary rotary{c.rope_dims, c.halves, c.linear_factor > 0 ? 1.0 / c.linear_factor : 1.0,
                  spec.rope_freqs};
    std::vector<int> tokens(kPositions);
    for (int p = 0; p < kPositions; ++p) tokens[p] = (p * 11 + 5) % spec.vocab;
    const std::vector<Vector> want = reference_logits(weights, spec, tokens, {}, rotary);
    LoadedModel model = load_model(path, parse_precision("f32"));
    EXPECT_EQ(model.weights.config.qkv_bias, c.bias);
    ThreadPool pool(2);
    LlamaExecutor executor(model.weights, pool);
    const std::vector<std::vector<float>> got =
        prompt_then_decode(executor, tokens, kPrompt, spec.vocab);
    expect_logits_near(got, want, 1e-3);
  }
  std::filesystem::remove(path);
}

// int8: s = f16(max|x| / 127) (the cache keeps f16 scales), x -> s * round(x / s) (half
// away from zero), over the values of each row (values) or of each channel (keys) of a
// group of rows.
void round_int8(double* x, int count, int step) {
  double absmax = 0;
  for (int i = 0; i < count; ++i) absmax = std::max(absmax, std::fabs(x[i * step]));
  const double s = f16_scale(absmax);
  for (int i = 0; i < count; ++i) x[i * step] = s > 0 ? s * std::round(x[i * step] / s) : 0.0;
}
void round_int8_per_row(double* rows, int count, int n) {
  for (int p = 0; p < count; ++p) round_int8(rows + std::ptrdiff_t(p) * n, n, 1);
}
void round_int8_per_channel(double* rows, int count, int n) {
  for (int c = 0; c < n; ++c) round_int8(rows + c, count, n);
}

// bf16: the top 16 bits of the float, rounded to nearest even.
void round_bf16(double* row, int n) {
  for (int i = 0; i < n; ++i) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(static_cast<float>(row[i]));
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
    row[i] = std::bit_cast<float>(bits);
  }
}

// The int8 and bf16 caches against the float64 forward whose cached rows are rounded the
// same way (int8: KIVI's groups of 32, so a 37-token prompt then decode to 70 crosses a
// rounded group, an open one, a group completed by decode and a new open one): prompt and
// decode, every head layout. The executor's k and v come from f32
// matmuls, so a value near a rounding boundary may round the other way: the bound is
// looser than f32's, still far below a wrong row, head or scale (O(1)).
TEST(AttentionReference, QuantizedCachesMatchFloat64WithTheSameRounding) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qforge_attention_kv_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  constexpr int kPrompt = 37, kPositions = 70;
  for (const KvType kv : {KvType::int8, KvType::bf16})
    for (const int kv_heads : {4, 1}) {
      const test::TinyLlama spec = attention_model(kv_heads, kPositions);
      const Weights weights = test::write_tiny_llama(path, spec);
      std::vector<int> tokens(kPositions);
      for (int p = 0; p < kPositions; ++p) tokens[p] = (p * 5 + 1) % spec.vocab;
      CacheRounding rounding;
      if (kv == KvType::int8)
        rounding = {nullptr, KvCache::kGroup, round_int8_per_channel, round_int8_per_row, true};
      else
        rounding.row = round_bf16;
      const std::vector<Vector> want = reference_logits(weights, spec, tokens, rounding);
      const std::vector<Vector> unrounded = reference_logits(weights, spec, tokens);
      Precision precision = parse_precision("f32");
      precision.kv = kv;
      LoadedModel model = load_model(path, precision);
      set_dense_threads(1);
      ThreadPool pool(2);
      LlamaExecutor executor(model.weights, pool);
      SCOPED_TRACE(std::string("kv ") + (kv == KvType::int8 ? "int8" : "bf16") + ", kv heads " +
                   std::to_string(kv_heads));
      const std::vector<std::vector<float>> got =
          prompt_then_decode(executor, tokens, kPrompt, spec.vocab);
      double worst = 0, worst_unrounded = 0;
      for (int p = 0; p < kPositions; ++p) {
        double largest = 0;
        for (double v : want[p]) largest = std::max(largest, std::fabs(v));
        for (int i = 0; i < spec.vocab; ++i) {
          worst = std::max(worst, std::fabs(got[p][i] - want[p][i]) / largest);
          worst_unrounded =
              std::max(worst_unrounded, std::fabs(got[p][i] - unrounded[p][i]) / largest);
        }
      }
      EXPECT_LT(worst, 1e-2);
      // The rounding is really there: the unrounded forward is further away.
      EXPECT_LT(worst, worst_unrounded);
    }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qforge
