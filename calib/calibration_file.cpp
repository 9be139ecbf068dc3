#include "calib/calibration_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "jit/base/error.h"

namespace qforge {
namespace {

constexpr char kMagic[8] = {'Q', 'F', 'C', 'A', 'L', 'I', 'B', '1'};
constexpr std::uint64_t kAlign = 64;

std::uint64_t align_up(std::uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// Byte offsets of a site's arrays from its start, and its size.
struct SiteLayout {
  std::uint64_t absmax = 0, mean_abs, mean_sq, gram, bytes;
  SiteLayout(int k, bool with_gram) {
    const auto n = static_cast<std::uint64_t>(k);
    mean_abs = align_up(absmax + 4 * n);
    mean_sq = align_up(mean_abs + 8 * n);
    gram = align_up(mean_sq + 8 * n);
    bytes = with_gram ? align_up(gram + 8 * n * n) : gram;
  }
};

std::uint64_t fnv1a(std::uint64_t hash, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ULL;
  return hash;
}
constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

std::string hex16(std::uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

std::vector<CalibrationSiteSpec> calibration_sites(const LlamaConfig& c) {
  std::vector<CalibrationSiteSpec> sites;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    sites.push_back({prefix + "attn_qkv", c.dim});
    sites.push_back({prefix + "attn_output", c.dim});
    sites.push_back({prefix + "ffn_gate_up", c.dim});
    sites.push_back({prefix + "ffn_down", c.hidden_dim});
  }
  sites.push_back({"output", c.dim});
  return sites;
}

double CalibrationSite::outlier_ratio() const {
  SiteStatistics s;
  s.absmax.assign(absmax.begin(), absmax.end());
  return s.outlier_ratio();
}

// ---- writing ----

CalibrationWriter::CalibrationWriter(std::string path, const LlamaConfig& config,
                                     const CalibrationSource& source,
                                     std::vector<CalibrationSiteSpec> sites, std::uint64_t count)
    : path_(std::move(path)),
      temp_(path_ + ".tmp"),
      config_(config),
      source_(source),
      sites_(std::move(sites)),
      checksums_(sites_.size(), 0),
      count_(count) {
  std::uint64_t offset = 0;
  for (const CalibrationSiteSpec& s : sites_) {
    const SiteLayout layout(s.k, source_.gram);
    offsets_.push_back(offset);
    sizes_.push_back(layout.bytes);
    offset += layout.bytes;
  }
  file_ = std::fopen(temp_.c_str(), "wb");
  QF_REQUIRE(file_ != nullptr, path_, ": cannot create ", temp_, ": ", std::strerror(errno));
  const std::string header = header_json();
  payload_ = align_up(16 + header.size());
  write_at(0, nullptr, 0);  // checks the stream
}

CalibrationWriter::~CalibrationWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!committed_) std::filesystem::remove(temp_);
}

std::string CalibrationWriter::header_json() const {
  nlohmann::ordered_json sites = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < sites_.size(); ++i)
    sites.push_back({{"name", sites_[i].name},
                     {"k", sites_[i].k},
                     {"count", count_},
                     {"offset", offsets_[i]},
                     {"bytes", sizes_[i]},
                     {"fnv1a", hex16(checksums_[i])}});
  const nlohmann::ordered_json j = {{"format", "qforge-calibration"},
                                    {"version", kCalibrationVersion},
                                    {"model",
                                     {{"file", source_.model_file},
                                      {"dim", config_.dim},
                                      {"hidden_dim", config_.hidden_dim},
                                      {"n_layers", config_.n_layers},
                                      {"n_heads", config_.n_heads},
                                      {"n_kv_heads", config_.n_kv_heads},
                                      {"vocab_size", config_.vocab_size}}},
                                    {"source",
                                     {{"text", source_.text},
                                      {"samples", source_.samples},
                                      {"ctx", source_.ctx},
                                      {"precision", source_.precision}}},
                                    {"gram", source_.gram},
                                    {"sites", sites}};
  return j.dump();  // fixed width: checksums are 16 hex digits before and after
}

void CalibrationWriter::write_at(std::uint64_t offset, const void* data, std::size_t bytes) {
  if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0 ||
      (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes))
    fail(path_, ": writing ", temp_, " failed at byte ", offset, ": ", std::strerror(errno));
}

void CalibrationWriter::add(const SiteStatistics& s) {
  QF_REQUIRE(next_ < sites_.size(), temp_, ": more sites than declared");
  const CalibrationSiteSpec& spec = sites_[next_];
  QF_REQUIRE(s.name == spec.name && s.k == spec.k, temp_, ": site ", s.name, " (k ", s.k,
             ") where ", spec.name, " (k ", spec.k, ") was declared");
  QF_REQUIRE(s.count == count_, temp_, ": site ", s.name, " saw ", s.count, " tokens, not ",
             count_);
  QF_REQUIRE(source_.gram == !s.gram.empty(), temp_, ": site ", s.name,
             source_.gram ? " has no Gram matrix" : " has an undeclared Gram matrix");
  const SiteLayout layout(s.k, source_.gram);
  std::vector<std::byte> bytes(layout.bytes, std::byte{0});
  std::memcpy(bytes.data() + layout.absmax, s.absmax.data(), s.absmax.size() * 4);
  std::memcpy(bytes.data() + layout.mean_abs, s.mean_abs.data(), s.mean_abs.size() * 8);
  std::memcpy(bytes.data() + layout.mean_sq, s.mean_sq.data(), s.mean_sq.size() * 8);
  if (source_.gram) std::memcpy(bytes.data() + layout.gram, s.gram.data(), s.gram.size() * 8);
  checksums_[next_] = fnv1a(kFnvBasis, bytes.data(), bytes.size());
  write_at(payload_ + offsets_[next_], bytes.data(), bytes.size());
  ++next_;
}

void CalibrationWriter::commit() {
  QF_REQUIRE(next_ == sites_.size(), temp_, ": ", sites_.size() - next_, " sites missing");
  std::string header = header_json();
  header.resize(payload_ - 16, ' ');
  const std::uint32_t version = kCalibrationVersion;
  const auto header_bytes = static_cast<std::uint32_t>(header.size());
  write_at(0, kMagic, sizeof kMagic);
  write_at(8, &version, 4);
  write_at(12, &header_bytes, 4);
  write_at(16, header.data(), header.size());
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  QF_REQUIRE(flushed && closed, path_, ": writing ", temp_, " failed: ", std::strerror(errno));
  std::error_code error;
  std::filesystem::rename(temp_, path_, error);
  QF_REQUIRE(!error, path_, ": cannot rename ", temp_, ": ", error.message());
  committed_ = true;
}

// ---- reading ----

CalibrationFile CalibrationFile::open(const std::string& path) {
  CalibrationFile out;
  out.file_ = std::make_unique<MappedFile>(path);
  const std::span<const std::byte> bytes = out.file_->bytes();
  QF_REQUIRE(bytes.size() >= 16 && std::memcmp(bytes.data(), kMagic, 8) == 0, path,
             ": not a qforge calibration file (magic)");
  std::uint32_t version = 0, header_bytes = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&header_bytes, bytes.data() + 12, 4);
  QF_REQUIRE(version == kCalibrationVersion, path, ": calibration file version ", version,
             " (this qforge reads version ", kCalibrationVersion, ")");
  QF_REQUIRE(header_bytes <= bytes.size() - 16, path, ": header of ", header_bytes,
             " bytes runs past the end of the file (", bytes.size(), " bytes)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(
        std::string_view(reinterpret_cast<const char*>(bytes.data()) + 16, header_bytes));
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": header is not JSON: ", e.what());
  }
  // Typed field access naming the path of the field.
  auto field = [&](const nlohmann::json& obj, const char* key, const std::string& where) {
    QF_REQUIRE(obj.is_object() && obj.contains(key), path, ": field '", where, key, "' missing");
    return obj.at(key);
  };
  auto integer = [&](const nlohmann::json& obj, const char* key, const std::string& where,
                     std::int64_t lo, std::int64_t hi) {
    const nlohmann::json v = field(obj, key, where);
    QF_REQUIRE(v.is_number_integer(), path, ": field '", where, key, "' is not an integer");
    const auto value = v.get<std::int64_t>();
    QF_REQUIRE(value >= lo && value <= hi, path, ": field '", where, key, "' = ", value,
               " is outside [", lo, ", ", hi, "]");
    return value;
  };
  auto text = [&](const nlohmann::json& obj, const char* key, const std::string& where) {
    const nlohmann::json v = field(obj, key, where);
    QF_REQUIRE(v.is_string(), path, ": field '", where, key, "' is not a string");
    return v.get<std::string>();
  };
  QF_REQUIRE(text(j, "format", "") == "qforge-calibration", path,
             ": field 'format' is not \"qforge-calibration\"");
  QF_REQUIRE(integer(j, "version", "", 0, 1 << 20) == kCalibrationVersion, path,
             ": field 'version' disagrees with the file's version");
  constexpr std::int64_t kBig = 1 << 24;
  const nlohmann::json model = field(j, "model", "");
  LlamaConfig& c = out.config_;
  c.dim = static_cast<int>(integer(model, "dim", "model.", 1, kBig));
  c.hidden_dim = static_cast<int>(integer(model, "hidden_dim", "model.", 1, kBig));
  c.n_layers = static_cast<int>(integer(model, "n_layers", "model.", 1, 4096));
  c.n_heads = static_cast<int>(integer(model, "n_heads", "model.", 1, kBig));
  c.n_kv_heads = static_cast<int>(integer(model, "n_kv_heads", "model.", 1, kBig));
  c.vocab_size = static_cast<int>(integer(model, "vocab_size", "model.", 1, 1 << 30));
  const nlohmann::json source = field(j, "source", "");
  out.source_.model_file = text(model, "file", "model.");
  out.source_.text = text(source, "text", "source.");
  out.source_.samples = static_cast<int>(integer(source, "samples", "source.", 1, kBig));
  out.source_.ctx = static_cast<int>(integer(source, "ctx", "source.", 1, kBig));
  out.source_.precision = text(source, "precision", "source.");
  const nlohmann::json gram = field(j, "gram", "");
  QF_REQUIRE(gram.is_boolean(), path, ": field 'gram' is not true or false");
  out.source_.gram = gram.get<bool>();

  const std::vector<CalibrationSiteSpec> expected = calibration_sites(c);
  const nlohmann::json sites = field(j, "sites", "");
  QF_REQUIRE(sites.is_array() && sites.size() == expected.size(), path, ": field 'sites' has ",
             sites.is_array() ? sites.size() : 0, " entries; a model of ", c.n_layers,
             " layers has ", expected.size());
  const std::uint64_t payload = align_up(16 + std::uint64_t{header_bytes});
  for (std::size_t i = 0; i < sites.size(); ++i) {
    const std::string where = "sites[" + std::to_string(i) + "].";
    const nlohmann::json& s = sites[i];
    CalibrationSite site;
    site.name = text(s, "name", where);
    site.k = static_cast<int>(integer(s, "k", where, 1, kBig));
    QF_REQUIRE(site.name == expected[i].name && site.k == expected[i].k, path, ": field '", where,
               "name' is ", site.name, " (k ", site.k, "), expected ", expected[i].name, " (k ",
               expected[i].k, ")");
    site.count = static_cast<std::uint64_t>(integer(s, "count", where, 1, std::int64_t{1} << 40));
    const auto offset =
        static_cast<std::uint64_t>(integer(s, "offset", where, 0, std::int64_t{1} << 50));
    const SiteLayout layout(site.k, out.source_.gram);
    QF_REQUIRE(static_cast<std::uint64_t>(integer(s, "bytes", where, 0, std::int64_t{1} << 50)) ==
                   layout.bytes,
               path, ": field '", where, "bytes' disagrees with k = ", site.k);
    QF_REQUIRE(offset % kAlign == 0 && payload + offset + layout.bytes <= bytes.size(), path,
               ": field '", where, "offset' puts ", site.name, " outside the file (", bytes.size(),
               " bytes; truncated?)");
    const std::byte* base = bytes.data() + payload + offset;
    const std::string checksum = text(s, "fnv1a", where);
    QF_REQUIRE(checksum == hex16(fnv1a(kFnvBasis, base, layout.bytes)), path, ": site ", site.name,
               " fails its checksum (field '", where, "fnv1a'): the file is corrupt");
    const auto k = static_cast<std::size_t>(site.k);
    site.absmax = {reinterpret_cast<const float*>(base + layout.absmax), k};
    site.mean_abs = {reinterpret_cast<const double*>(base + layout.mean_abs), k};
    site.mean_sq = {reinterpret_cast<const double*>(base + layout.mean_sq), k};
    if (out.source_.gram) site.gram = {reinterpret_cast<const double*>(base + layout.gram), k * k};
    out.sites_.push_back(site);
  }
  return out;
}

const CalibrationSite& CalibrationFile::site(const std::string& name) const {
  for (const CalibrationSite& s : sites_)
    if (s.name == name) return s;
  fail(path(), ": no site ", name);
}

void CalibrationFile::check_model(const LlamaConfig& m, const std::string& model_path) const {
  const LlamaConfig& c = config_;
  auto same = [&](const char* field, int file_value, int model_value) {
    QF_REQUIRE(file_value == model_value, path(), " was made for another model: field 'model.",
               field, "' is ", file_value, ", ", model_path, " has ", model_value);
  };
  same("dim", c.dim, m.dim);
  same("hidden_dim", c.hidden_dim, m.hidden_dim);
  same("n_layers", c.n_layers, m.n_layers);
  same("n_heads", c.n_heads, m.n_heads);
  same("n_kv_heads", c.n_kv_heads, m.n_kv_heads);
  same("vocab_size", c.vocab_size, m.vocab_size);
}

}  // namespace qforge
