#include "calib/input_scaling.h"

#include "jit/base/error.h"

namespace qforge {
namespace {

void scale_columns(ModelFile& model, const std::string& name, const std::vector<double>& s) {
  std::vector<float> w = tensor_f32(model, name);
  const std::size_t k = s.size();
  QF_REQUIRE(static_cast<std::int64_t>(k) == model.tensor(name).columns, name, ": ", k,
             " scales for ", model.tensor(name).columns, " columns");
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(w[i] * s[i % k]);
  model.replace_tensor(name, std::move(w));
}

// Row r divided by row_scale(r).
template <typename RowScale>
void divide_rows(ModelFile& model, const std::string& name, RowScale&& row_scale) {
  std::vector<float> w = tensor_f32(model, name);
  const TensorView& t = model.tensor(name);
  for (std::int64_t r = 0; r < t.rows; ++r) {
    const double s = row_scale(r);
    for (std::int64_t c = 0; c < t.columns; ++c)
      w[std::size_t(r * t.columns + c)] = static_cast<float>(w[std::size_t(r * t.columns + c)] / s);
  }
  model.replace_tensor(name, std::move(w));
}

void divide_norm(ModelFile& model, const std::string& norm, const std::vector<double>& s) {
  std::vector<float> w = tensor_f32(model, norm);
  QF_REQUIRE(w.size() == s.size(), norm, ": ", w.size(), " values for ", s.size(), " scales");
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = static_cast<float>(w[j] / s[j]);
  model.replace_tensor(norm, std::move(w));
}

}  // namespace

std::vector<float> tensor_f32(const ModelFile& model, const std::string& name) {
  const TensorView& t = model.tensor(name);
  std::vector<float> out(static_cast<std::size_t>(t.rows * t.columns));
  for (std::int64_t r = 0; r < t.rows; ++r)
    t.row_to_f32(r, std::span<float>(out.data() + r * t.columns, std::size_t(t.columns)));
  return out;
}

void tie_scales(std::vector<double>& values, const LlamaConfig& c) {
  const int head_dim = c.dim / c.n_heads, tie = c.n_heads / c.n_kv_heads;
  QF_REQUIRE(values.size() == static_cast<std::size_t>(c.dim), "tie_scales: ", values.size(),
             " values for dim ", c.dim);
  for (int g = 0; g < c.n_kv_heads; ++g)
    for (int d = 0; d < head_dim; ++d) {
      double sum = 0;
      for (int h = 0; h < tie; ++h) sum += values[std::size_t((g * tie + h) * head_dim + d)];
      for (int h = 0; h < tie; ++h) values[std::size_t((g * tie + h) * head_dim + d)] = sum / tie;
    }
}

void fold_input_scales(ModelFile& model, int l, const std::string& site,
                       const std::vector<double>& s) {
  const LlamaConfig& c = model.config();
  const auto name = [&](const char* role) { return layer_tensor_name(l, role); };
  if (site == "attn_qkv") {
    divide_norm(model, name("attn_norm"), s);
    for (const char* role : {"attn_q", "attn_k", "attn_v"}) scale_columns(model, name(role), s);
  } else if (site == "ffn_gate_up") {
    divide_norm(model, name("ffn_norm"), s);
    for (const char* role : {"ffn_gate", "ffn_up"}) scale_columns(model, name(role), s);
  } else if (site == "attn_output") {
    const int head_dim = c.dim / c.n_heads, tie = c.n_heads / c.n_kv_heads;
    for (int g = 0; g < c.n_kv_heads; ++g)
      for (int d = 0; d < head_dim; ++d)
        for (int h = 1; h < tie; ++h)
          QF_REQUIRE(s[std::size_t((g * tie + h) * head_dim + d)] ==
                         s[std::size_t(g * tie * head_dim + d)],
                     name("attn_output"), ": the query heads of kv head ", g,
                     " need one scale per v row (tie_scales)");
    divide_rows(model, name("attn_v"), [&](std::int64_t r) {
      return s[std::size_t((r / head_dim) * tie * head_dim + r % head_dim)];
    });
    scale_columns(model, name("attn_output"), s);
  } else if (site == "ffn_down") {
    divide_rows(model, name("ffn_up"), [&](std::int64_t r) { return s[std::size_t(r)]; });
    scale_columns(model, name("ffn_down"), s);
  } else {
    fail("fold_input_scales: no site '", site, "'");
  }
}

}  // namespace qforge
