// Static W8A8 activations: from a calibration file each block layer's scale is its
// maximum |x / s| / 127 (s: the input scales a method applied), computed here from the
// file's numbers; calibrated on chunks, the scales never exceed the maximum and --act
// auto keeps exactly the layers whose rounding error passes the fallback ratio; a JIT
// layer with a static scale computes the double-precision product of the clamped int8
// inputs and its weights; the built model names its static layers and keeps the kernels
// of the dynamic scheme; dense precisions and auto with a file are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "calib/calibration_file.h"
#include "calib/calibrator.h"
#include "calib/static_activations.h"
#include "jit/base/error.h"
#include "model/runtime/jit_linear.h"
#include "model/runtime/model_session.h"
#include "ops/quant/quantize.h"
#include "tests/support/model_paths.h"
#include "tests/support/random_data.h"
#include "tests/support/test_data.h"

namespace qforge {
namespace {

std::string stories() {
  return test::model_path("stories260K/stories260K.gguf");
}

std::vector<std::vector<int>> calib_chunks(const Tokenizer& tokenizer, int samples, int ctx) {
  return calibration_chunks(
      tokenizer.encode(test::read_test_data("stories260K_calib.txt"), true, false), samples, ctx,
      tokenizer.bos_id(), "calib");
}

TEST(StaticActivations, ScalesFromAFileAreTheMaximaOverTheInputScales) {
  ModelFile model = open_model(stories());
  const LlamaConfig& c = model.config();
  const std::string path =
      (std::filesystem::temp_directory_path() / "qforge_static_stats.qfcal").string();
  // Made-up statistics: channel j of site i has max |x| = 0.01 (1 + (7 i + 3 j) % 50).
  std::vector<CalibrationSiteSpec> sites = calibration_sites(c);
  {
    CalibrationWriter writer(
        path, c, CalibrationSource{"stories260K.gguf", "made up", 1, 10, "f32", false}, sites, 10);
    for (std::size_t i = 0; i < sites.size(); ++i) {
      SiteStatistics s;
      s.name = sites[i].name;
      s.k = sites[i].k;
      s.count = 10;
      for (int j = 0; j < s.k; ++j)
        s.absmax.push_back(0.01f * float(1 + (7 * i + 3 * std::size_t(j)) % 50));
      s.mean_abs.assign(std::size_t(s.k), 0.001);
      s.mean_sq.assign(std::size_t(s.k), 0.0001);
      writer.add(s);
    }
    writer.commit();
  }
  const CalibrationFile file = CalibrationFile::open(path);
  std::map<std::string, std::vector<double>, std::less<>> input_scales;
  std::vector<double> s(std::size_t(c.dim));
  for (std::size_t j = 0; j < s.size(); ++j) s[j] = 0.5 + double(j % 5);
  input_scales["blk.1.attn_qkv"] = s;
  const StaticActivationSummary summary = apply_static_activations(
      model, parse_precision("int8"), StaticActivationSource{&file, {}, &input_scales}, 1);
  ASSERT_EQ(summary.layers.size(), std::size_t(4 * c.n_layers)) << "the classifier stays dynamic";
  for (const StaticLayer& layer : summary.layers) {
    const CalibrationSite& site = file.site(layer.name);
    double m = 0;
    for (std::size_t j = 0; j < site.absmax.size(); ++j)
      m = std::max(m, site.absmax[j] / (layer.name == "blk.1.attn_qkv" ? s[j] : 1.0));
    EXPECT_FLOAT_EQ(layer.scale, float(m / 127)) << layer.name;
    EXPECT_TRUE(layer.is_static);
    EXPECT_EQ(layer.error_ratio, 0) << "a file has no sample rows";
    EXPECT_EQ(model.activation_scale(layer.name), layer.scale) << layer.name;
  }
  EXPECT_EQ(model.activation_scale("output"), 0.f);
  std::filesystem::remove(path);
  EXPECT_THROW(apply_static_activations(model, parse_precision("int8"),
                                        StaticActivationSource{&file, {}, nullptr, 3.0}, 1),
               Error)
      << "auto needs sample rows";
}

TEST(StaticActivations, AutoKeepsTheLayersWithinTheFallbackAndRunsTheSameKernels) {
  const Precision int8 = parse_precision("int8");
  // The median ratio as the fallback: some layers static, some not.
  double fallback = 0;
  {
    ModelFile file = open_model(stories());
    StaticActivationSource source;
    auto session = open_session(stories(), parse_precision("f32"), 1, 16);
    source.chunks = calib_chunks(session->model.tokenizer, 4, 256);
    source.fallback = 1e9;
    std::vector<double> ratios;
    for (const StaticLayer& l : apply_static_activations(file, int8, source, 2).layers)
      ratios.push_back(l.error_ratio);
    std::nth_element(ratios.begin(), ratios.begin() + 10, ratios.end());
    fallback = ratios[10];
  }
  StaticActivationSummary summary;
  std::map<std::string, float> scales;
  const ModelPreparer prepare = [&](ModelFile& file, const Tokenizer& tokenizer) {
    // Scales a file might hold already: auto must clear those of the layers it keeps
    // dynamic.
    for (const PlannedLayer& l : plan_linear_layers(file, int8))
      if (l.name != "output") file.set_activation_scale(l.name, 123.f);
    StaticActivationSource source;
    source.chunks = calib_chunks(tokenizer, 4, 256);
    source.fallback = fallback;
    summary = apply_static_activations(file, int8, source, 2);
    for (const StaticLayer& l : summary.layers) scales[l.name] = file.activation_scale(l.name);
  };
  auto dynamic = open_session(stories(), int8, 2, 256);
  auto calibrated = open_session(stories(), int8, 2, 256, "", {}, prepare);
  ASSERT_EQ(summary.layers.size(), 20u);
  int statics = 0;
  for (const StaticLayer& l : summary.layers) {
    EXPECT_GT(l.error_ratio, 0) << l.name;
    EXPECT_EQ(l.is_static, l.error_ratio <= fallback) << l.name;
    EXPECT_GT(l.scale, 0.f);
    EXPECT_EQ(scales.at(l.name), l.is_static ? l.scale : 0.f) << l.name;
    statics += l.is_static;
    const auto* jit =
        dynamic_cast<const JitLinear*>(calibrated->model.weights.linear_slot(l.name).get());
    ASSERT_NE(jit, nullptr) << l.name;
    EXPECT_EQ(jit->static_activation_scale(), l.is_static ? l.scale : 0.f) << l.name;
  }
  EXPECT_GT(statics, 0);
  EXPECT_LT(statics, 20);
  for (const auto& [layer, choice] : calibrated->model.weights.policy)
    EXPECT_EQ(choice.ends_with(" static-act"), scales.count(layer) && scales.at(layer) > 0)
        << layer << " " << choice;
  EXPECT_EQ(calibrated->model.weights.warmup_keys(), dynamic->model.weights.warmup_keys())
      << "static activations run the kernels of the dynamic scheme";

  // Each scale at most the calibration maximum over 127 (clipping only shrinks it): the
  // maxima measured here by a pass of their own.
  ModelFile file = open_model(stories());
  std::map<std::string, float> maxima;
  calibrate_model_blocks(file, calib_chunks(calibrated->model.tokenizer, 4, 256), false, 2,
                         [&](int, const BlockSites& sites, LlamaWeights&, const BlockRerun&) {
                           for (const auto& [name, site] : sites)
                             maxima[name] =
                                 *std::max_element(site.absmax.begin(), site.absmax.end());
                           return BlockStep::next;
                         });
  for (const StaticLayer& l : summary.layers)
    EXPECT_LE(l.scale, maxima.at(l.name) / 127.f * 1.000001f) << l.name;
}

// y = (a * clamp(round(x * (1 / a)), -127, 127)) W_q^T, in double, against the JIT layer with
// static scale a, for plain and residual fusion and a K with a tail.
TEST(StaticActivations, JitLayerComputesTheClampedProduct) {
  const std::int64_t m = 5, n = 24, k = 100;
  const auto w = test::random_floats(n * k, 11, 1.f);
  const auto x = test::random_floats(m * k, 12, 2.f);
  const float a = 1.f / 72.f;  // |x| up to 2 -> up to 144: some values clamp
  ThreadPool pool(2);
  for (const char* name : {"int8", "int4-g32", "int4-g32-asym"}) {
    const QuantizedTensor q = quantize_reference(w.data(), n, k, parse_quant_scheme(name));
    const std::vector<float> wd = dequantize(q);
    for (const LinearFusion fusion : {LinearFusion::plain, LinearFusion::residual}) {
      JitLinear layer(pack_quantized(q, 1), fusion);
      layer.set_static_activation_scale(a);
      std::vector<float> out(std::size_t(m * n), 0.25f);
      layer.forward(x.data(), m, k, out.data(), n, pool);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t j = 0; j < n; ++j) {
          double want = fusion == LinearFusion::residual ? 0.25 : 0.0, size = 0;
          for (std::int64_t i = 0; i < k; ++i) {
            const double xq =
                double(a) * std::clamp(std::round(x[r * k + i] * (1.f / a)), -127.f, 127.f);
            want += xq * wd[std::size_t(j * k + i)];
            size += std::fabs(xq * wd[std::size_t(j * k + i)]);
          }
          EXPECT_NEAR(out[std::size_t(r * n + j)], want, 1e-5 * size + 1e-6)
              << name << " row " << r << " col " << j;
        }
    }
  }
  JitLinear layer(pack_quantized(quantize_reference(w.data(), n, k, parse_quant_scheme("int8")), 1),
                  LinearFusion::plain);
  EXPECT_THROW(layer.set_static_activation_scale(-1.f), Error);
  EXPECT_THROW(layer.set_static_activation_scale(std::nanf("")), Error);
}

TEST(StaticActivations, RefusesDensePrecisions) {
  ModelFile file = open_model(stories());
  StaticActivationSource source;
  source.chunks = {{1, 5, 6, 7}};
  for (const char* quant : {"f32", "bf16"}) try {
      apply_static_activations(file, parse_precision(quant), source, 1);
      FAIL() << quant << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--act static with"), std::string::npos) << e.what();
    }
  EXPECT_THROW(file.set_activation_scale("blk.0.attn_qkv", 0.f), Error);
  EXPECT_THROW(file.set_activation_scale("blk.0.attn_qkv", INFINITY), Error);
}

}  // namespace
}  // namespace qforge
