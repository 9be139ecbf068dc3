#include "jit/tune/tuning_db.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

#include "jit/base/error.h"
#include "jit/gemm/register_budget.h"

namespace qforge {
namespace {

// Insertion order, so a file reads format, version, signature, then the entries.
using Json = nlohmann::ordered_json;

constexpr const char* kFormatName = "qforge-tuning";

std::optional<Epilogue> parse_epilogue_name(std::string_view name) {
  Epilogue e;
  auto take = [&](std::string_view part) {
    if (!name.starts_with(part)) return false;
    name.remove_prefix(part.size());
    return true;
  };
  if (!take("deq")) return std::nullopt;
  e.bias = take("-bias");
  e.swiglu = take("-swiglu");
  e.residual = take("-res");
  if (take("-f32"))
    e.output = OutputKind::f32;
  else if (take("-u8"))
    e.output = OutputKind::u8;
  else if (take("-sums"))
    e.output = OutputKind::group_sums;
  else
    return std::nullopt;
  if (!name.empty()) return std::nullopt;
  return e;
}

std::optional<MBucket> parse_bucket(std::string_view name) {
  for (MBucket b : {MBucket::one, MBucket::small, MBucket::large})
    if (name == bucket_name(b)) return b;
  return std::nullopt;
}

const char* split_name(ThreadSplit split) {
  return split == ThreadSplit::units ? "units" : "rows";
}

// Why the shape cannot be a kernel key, or "" when it can.
std::string shape_problem(const GemmKey& s) {
  if (s.isa == Isa::reference) return "isa: the reference path has no blocking";
  if (s.n < 1 || s.k < 1) return "n and k must be positive";
  if (s.bits != 8 && s.bits != 5 && s.bits != 4) return "bits must be 8, 5 or 4";
  if (s.group < 1 || s.k_padded < s.k || s.k_padded % s.group != 0)
    return "g must divide k_padded >= k";
  if (s.group % (s.bits == 8 ? 4 : s.bits == 5 ? 32 : 8) != 0)
    return "g must be a multiple of 4 (8 for int4, 32 for int5)";
  if (s.superblock_groups < 0 || (s.superblock_groups & (s.superblock_groups - 1)) != 0 ||
      (s.superblock_groups > 0 && s.k_padded / s.group % s.superblock_groups != 0))
    return "superblock_groups must be a power of two dividing the groups";
  if (s.epilogue.bias && s.epilogue.swiglu) return "epilogue: bias with swiglu";
  return "";
}

// Times to the nanosecond: enough for a reader, and short.
double rounded(double us) {
  return std::round(us * 1000) / 1000;
}

Json entry_to_json(const TuningKey& key, const TunedKernel& t) {
  const GemmKey& s = key.shape;
  Json j = {{"isa", std::string(isa_name(s.isa))},
            {"n", s.n},
            {"k", s.k},
            {"k_padded", s.k_padded},
            {"g", s.group},
            {"bits", s.bits},
            {"asymmetric", s.asymmetric},
            {"epilogue", epilogue_name(s.epilogue)},
            {"m_bucket", bucket_name(s.bucket)},
            {"threads", key.threads},
            {"blocking",
             {{"mr", t.blocking.mr},
              {"nr", t.blocking.nr},
              {"k_unroll", t.blocking.k_unroll},
              {"prefetch_distance", t.blocking.prefetch_distance}}},
            {"default_us", rounded(t.default_us)},
            {"tuned_us", rounded(t.tuned_us)}};
  if (s.activation != ActivationKind::s8) j["activation"] = activation_name(s.activation);
  if (s.superblock_groups) j["superblock_groups"] = s.superblock_groups;
  if (t.amx_min_m) j["amx_min_m"] = *t.amx_min_m;
  if (t.gemm_min_m) j["gemm_min_m"] = *t.gemm_min_m;
  if (t.thread_split) j["thread_split"] = split_name(*t.thread_split);
  return j;
}

// An integer field in [lo, hi]: a float, a string or an out-of-range number is refused
// naming the field (a float never converts: 2e124 has no integer value).
template <typename Int>
Int integer_field(const Json& j, const char* field, Int lo = std::numeric_limits<Int>::min(),
                  Int hi = std::numeric_limits<Int>::max()) {
  const Json& v = j.at(field);
  QF_REQUIRE(v.is_number_integer(), field, ": not an integer (", v.dump(), ")");
  const bool fits = v.is_number_unsigned()
                        ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                        : v.get<std::int64_t>() >= static_cast<std::int64_t>(lo) &&
                              v.get<std::int64_t>() <= static_cast<std::int64_t>(hi);
  QF_REQUIRE(fits, field, ": ", v.dump(), " is outside [", lo, ", ", hi, "]");
  return static_cast<Int>(v.is_number_unsigned() ? static_cast<std::int64_t>(v.get<std::uint64_t>())
                                                 : v.get<std::int64_t>());
}

// One entry back from JSON; throws (nlohmann or qforge::Error) when it is not valid.
std::pair<TuningKey, TunedKernel> entry_from_json(const Json& j) {
  TuningKey key;
  GemmKey& s = key.shape;
  s.isa = parse_isa(j.at("isa").get<std::string>(), "isa");
  s.n = integer_field<std::int64_t>(j, "n");
  s.k = integer_field<std::int64_t>(j, "k");
  s.k_padded = integer_field<std::int64_t>(j, "k_padded");
  s.group = integer_field<std::int64_t>(j, "g");
  s.bits = integer_field<int>(j, "bits");
  s.asymmetric = j.at("asymmetric").get<bool>();
  if (j.contains("superblock_groups"))
    s.superblock_groups = integer_field<int>(j, "superblock_groups", 1, 1 << 16);
  if (j.contains("activation")) {
    s.activation = parse_activation(j.at("activation").get<std::string>(), "activation");
  }
  const std::string epilogue = j.at("epilogue").get<std::string>();
  const auto parsed_epilogue = parse_epilogue_name(epilogue);
  QF_REQUIRE(parsed_epilogue, "epilogue: unknown name \"", epilogue, "\"");
  s.epilogue = *parsed_epilogue;
  const std::string bucket = j.at("m_bucket").get<std::string>();
  const auto parsed_bucket = parse_bucket(bucket);
  QF_REQUIRE(parsed_bucket, "m_bucket: unknown \"", bucket, "\" (m1 | ms | ml)");
  s.bucket = *parsed_bucket;
  key.threads = integer_field<int>(j, "threads");
  QF_REQUIRE(key.threads >= 1, "threads must be >= 1");
  const std::string problem = shape_problem(s);
  QF_REQUIRE(problem.empty(), problem);

  TunedKernel t;
  const Json& b = j.at("blocking");
  t.blocking =
      Blocking{integer_field<int>(b, "mr"), integer_field<int>(b, "nr"),
               integer_field<int>(b, "k_unroll"), integer_field<int>(b, "prefetch_distance")};
  key = tuning_key_of(s, key.threads);
  QF_REQUIRE(fits(s, t.blocking), "blocking ", t.blocking.mr, "x", t.blocking.nr, "u",
             t.blocking.k_unroll, "p", t.blocking.prefetch_distance,
             " does not fit the register budget of ", kernel_name(s));
  if (j.contains("amx_min_m")) t.amx_min_m = integer_field<int>(j, "amx_min_m");
  if (j.contains("gemm_min_m")) t.gemm_min_m = integer_field<int>(j, "gemm_min_m");
  QF_REQUIRE(t.amx_min_m.value_or(1) >= 1, "amx_min_m must be >= 1");
  QF_REQUIRE(t.gemm_min_m.value_or(2) >= 2 && t.gemm_min_m.value_or(2) <= kMaxGemmMinRows,
             "gemm_min_m must be in 2..", kMaxGemmMinRows);
  if (j.contains("thread_split")) {
    const std::string split = j.at("thread_split").get<std::string>();
    QF_REQUIRE(split == "units" || split == "rows", "thread_split: \"", split, "\" (units | rows)");
    t.thread_split = split == "units" ? ThreadSplit::units : ThreadSplit::rows;
  }
  t.default_us = j.value("default_us", 0.0);
  t.tuned_us = j.value("tuned_us", 0.0);
  return {key, t};
}

}  // namespace

TuningKey tuning_key_of(const GemmKey& key, int threads) {
  TuningKey out{key, threads};
  out.shape.blocking = Blocking{0, 0, 0, 0};
  out.shape.woq_chains = false;  // the CPU's rule for the rest of the key, not a shape
  return out;
}

std::size_t TuningKeyHash::operator()(const TuningKey& key) const {
  const std::size_t h = GemmKeyHash{}(key.shape);
  return h ^ (std::hash<int>{}(key.threads) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

TuningDb::TuningDb(std::string signature) : signature_(std::move(signature)) {}

void TuningDb::set(const TuningKey& key, const TunedKernel& tuned) {
  const TuningKey normal = tuning_key_of(key.shape, key.threads);
  QF_REQUIRE(fits(normal.shape, tuned.blocking), "tuning: blocking does not fit ",
             kernel_name(normal.shape));
  QF_REQUIRE(tuned.gemm_min_m.value_or(2) >= 2 && tuned.gemm_min_m.value_or(2) <= kMaxGemmMinRows,
             "tuning: gemm_min_m ", tuned.gemm_min_m.value_or(0), " is outside 2..",
             kMaxGemmMinRows, " for ", kernel_name(normal.shape));
  entries_[normal] = tuned;
}

const TunedKernel* TuningDb::find(const TuningKey& key) const {
  const auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void TuningDb::merge(const TuningDb& other) {
  for (const auto& [key, tuned] : other.entries_) entries_[key] = tuned;
}

std::string TuningDb::to_json() const {
  Json entries = Json::array();
  for (const auto& [key, tuned] : entries_) entries.push_back(entry_to_json(key, tuned));
  // Stable order (by kernel name, then threads) so files diff well.
  std::sort(entries.begin(), entries.end(),
            [](const Json& a, const Json& b) { return a.dump() < b.dump(); });
  const Json doc = {{"format", kFormatName},
                    {"version", kTuningFormatVersion},
                    {"generator_version", kGemmGeneratorVersion},
                    {"signature", signature_},
                    {"entries", entries}};
  return doc.dump(2) + "\n";
}

void TuningDb::save(const std::filesystem::path& path) const {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  QF_REQUIRE(!ec, path.string(), ": cannot create the directory (", ec.message(), ")");
  const std::filesystem::path temp =
      path.string() + ".tmp." + std::to_string(static_cast<long>(getpid()));
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    QF_REQUIRE(out, path.string(), ": cannot create ", temp.string(), ": ", std::strerror(errno));
    out << to_json();
    out.close();
    if (!out) {
      const int error = errno;
      std::filesystem::remove(temp, ec);
      fail(path.string(), ": writing ", temp.string(), " failed: ", std::strerror(error));
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(temp, ec);
    fail(path.string(), ": cannot replace the tuning database (", why, ")");
  }
}

TuningDbLoad parse_tuning_db(std::string_view text, const std::string& signature,
                             const std::string& origin) {
  TuningDbLoad result;
  auto reject = [&](const std::string& why) {
    result.error = origin + ": " + why;
    return result;
  };
  try {
    const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return reject("not valid JSON (corrupt or truncated)");
    if (!doc.is_object() || doc.value("format", std::string()) != kFormatName)
      return reject(std::string("not a qforge tuning database (\"format\" is not \"") +
                    kFormatName + "\")");
    const Json version = doc.value("version", Json());
    if (!version.is_number_integer() || version.get<int>() != kTuningFormatVersion)
      return reject("format version " + version.dump() + ", this qforge reads version " +
                    std::to_string(kTuningFormatVersion));
    const Json generator = doc.value("generator_version", Json());
    if (!generator.is_number_integer() || generator.get<int>() != kGemmGeneratorVersion)
      return reject("measured with kernel generator version " + generator.dump() +
                    ", this qforge has version " + std::to_string(kGemmGeneratorVersion));
    const Json file_signature = doc.value("signature", Json());
    if (!file_signature.is_string() || file_signature.get<std::string>() != signature)
      return reject("for CPU " + file_signature.dump() + ", this CPU is \"" + signature + "\"");
    const Json entries = doc.value("entries", Json());
    if (!entries.is_array()) return reject("\"entries\" is not an array");

    TuningDb db(signature);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      try {
        const auto [key, tuned] = entry_from_json(entries[i]);
        db.set(key, tuned);
      } catch (const std::exception& e) {
        result.warnings.push_back(origin + ": entry " + std::to_string(i) +
                                  " dropped: " + e.what());
      }
    }
    result.db = std::move(db);
  } catch (const std::exception& e) {
    return reject(e.what());
  }
  return result;
}

TuningDbLoad load_tuning_db(const std::filesystem::path& path, const std::string& signature) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    TuningDbLoad result;
    result.error = path.string() + ": cannot be read";
    return result;
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse_tuning_db(text.str(), signature, path.string());
}

}  // namespace qforge
