// The calibration file: what `qforge calibrate` measured of every linear input, for the
// quantization steps that need it (quant-report, SmoothQuant, GPTQ, AWQ).
//
//   offset 0    "QFCALIB1"                           magic (8 bytes)
//          8    u32 version (kCalibrationVersion)     little-endian
//          12   u32 H: header bytes
//          16   header, H bytes of JSON (space-padded so the payload starts 64-aligned):
//                 {"format": "qforge-calibration", "version": 1,
//                  "model": {"file", "dim", "hidden_dim", "n_layers", "n_heads",
//                            "n_kv_heads", "vocab_size"},
//                  "source": {"text", "samples", "ctx", "precision"},
//                  "gram": bool,
//                  "sites": [{"name", "k", "count", "offset", "bytes", "fnv1a"}, ...]}
//          P    payload; site i at P + offset (64-aligned), `bytes` long:
//                 absmax f32[k] | pad64 | mean_abs f64[k] | pad64 | mean_sq f64[k] | pad64
//                 | gram f64[k * k] (only with "gram")
//
// Sites are in forward order (blk.0.attn_qkv, attn_output, ffn_gate_up, ffn_down, blk.1...,
// output). Each site's bytes carry an FNV-1a 64 checksum; a reader checks the magic, the
// version, every field and every checksum, and names the file and the field at fault.
// The file appears atomically (written to "<path>.tmp", renamed when complete).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "calib/activation_stats.h"
#include "model/format/llama_config.h"
#include "model/format/mapped_file.h"

namespace qforge {

inline constexpr std::uint32_t kCalibrationVersion = 1;

struct CalibrationSource {
  std::string model_file;  // the model's file name (informational)
  std::string text;        // the calibration text's path
  int samples = 0;         // chunks of ctx tokens
  int ctx = 0;
  std::string precision;  // the precision the model ran in
  bool gram = false;
};

struct CalibrationSiteSpec {
  std::string name;
  int k = 0;
};

// The sites of a model in forward order: per layer qkv (dim), wo (dim), gate_up (dim),
// down (hidden), then the classifier (dim).
std::vector<CalibrationSiteSpec> calibration_sites(const LlamaConfig& config);

class CalibrationWriter {
 public:
  // Opens "<path>.tmp" and writes the header; sites follow with add() in `sites` order.
  CalibrationWriter(std::string path, const LlamaConfig& config, const CalibrationSource& source,
                    std::vector<CalibrationSiteSpec> sites, std::uint64_t count);
  ~CalibrationWriter();  // without commit(): the temporary file is removed
  CalibrationWriter(const CalibrationWriter&) = delete;
  CalibrationWriter& operator=(const CalibrationWriter&) = delete;

  void add(const SiteStatistics& site);
  // After the last site: checksums into the header, then the rename.
  void commit();

 private:
  std::string header_json() const;
  void write_at(std::uint64_t offset, const void* data, std::size_t bytes);

  std::string path_, temp_;
  LlamaConfig config_;
  CalibrationSource source_;
  std::vector<CalibrationSiteSpec> sites_;
  std::vector<std::uint64_t> offsets_, sizes_, checksums_;
  std::uint64_t count_;
  std::uint64_t payload_ = 0;  // offset of the payload in the file
  std::size_t next_ = 0;       // the next site to add
  std::FILE* file_ = nullptr;
  bool committed_ = false;
};

// A view of one site inside a mapped calibration file.
struct CalibrationSite {
  std::string name;
  int k = 0;
  std::uint64_t count = 0;
  std::span<const float> absmax;
  std::span<const double> mean_abs, mean_sq;
  std::span<const double> gram;  // empty without "gram"

  double outlier_ratio() const;
};

class CalibrationFile {
 public:
  // Maps and validates the whole file; throws qforge::Error naming the file and field.
  static CalibrationFile open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const CalibrationSource& source() const { return source_; }
  const std::vector<CalibrationSite>& sites() const { return sites_; }
  const LlamaConfig& config() const { return config_; }        // the model's shape it names
  const CalibrationSite& site(const std::string& name) const;  // throws if absent
  // Throws unless the file was made for a model of `config`'s shape (`model_path` for
  // the message), with every site that model has.
  void check_model(const LlamaConfig& config, const std::string& model_path) const;

 private:
  std::unique_ptr<MappedFile> file_;
  CalibrationSource source_;
  LlamaConfig config_;
  std::vector<CalibrationSite> sites_;
};

}  // namespace qforge
