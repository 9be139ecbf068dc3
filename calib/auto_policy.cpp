#include "calib/auto_policy.h"

#include <algorithm>
#include <map>

#include "jit/base/error.h"

namespace qforge {
namespace {

struct Candidate {
  std::string name;
  double benefit_per_byte;
  std::uint64_t extra_bytes;
};

// The base model with the first `count` candidates' upgraded layers swapped in, measured.
PerplexityResult measure(const std::vector<Candidate>& candidates, std::size_t count,
                         ModelSession& base, ModelSession& upgrade, const KldEvaluator& kld) {
  auto swap_prefix = [&] {
    for (std::size_t i = 0; i < count; ++i)
      std::swap(base.model.weights.linear_slot(candidates[i].name),
                upgrade.model.weights.linear_slot(candidates[i].name));
  };
  swap_prefix();
  try {
    const PerplexityResult r = kld.evaluate(*base.executor);
    swap_prefix();
    return r;
  } catch (...) {
    swap_prefix();
    throw;
  }
}

}  // namespace

AutoPolicy choose_auto_policy(const QuantReport& report, ModelSession& base, ModelSession& upgrade,
                              const KldEvaluator& kld, const AutoPolicyGoal& goal) {
  QF_REQUIRE((goal.target_kld > 0) != (goal.max_bytes > 0),
             "--auto-policy: give one of --target-kld and --max-bytes");
  const std::map<std::string, std::string> upgraded_scheme(upgrade.model.weights.policy.begin(),
                                                           upgrade.model.weights.policy.end());
  AutoPolicy out;
  std::vector<Candidate> candidates;
  for (const LayerQuantReport& l : report.layers) {
    const std::uint64_t up = upgrade.model.weights.linear_slot(l.name)->weight_bytes();
    out.base_bytes += l.quantized_bytes;
    out.upgrade_bytes += up;
    if (upgraded_scheme.at(l.name) == l.scheme || up <= l.quantized_bytes) continue;
    candidates.push_back({l.name, l.sensitivity_kld / static_cast<double>(up - l.quantized_bytes),
                          up - l.quantized_bytes});
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.benefit_per_byte > b.benefit_per_byte;
  });
  auto bytes_of = [&](std::size_t count) {
    std::uint64_t bytes = out.base_bytes;
    for (std::size_t i = 0; i < count; ++i) bytes += candidates[i].extra_bytes;
    return bytes;
  };
  std::size_t count = 0;
  PerplexityResult result;
  if (goal.max_bytes > 0) {
    while (count < candidates.size() && bytes_of(count + 1) <= goal.max_bytes) ++count;
    result = measure(candidates, count, base, upgrade, kld);
    ++out.evaluations;
    out.met = bytes_of(count) <= goal.max_bytes;
  } else {
    // The smallest prefix meeting the target: KLD falls (nearly) monotonically with it.
    std::size_t lo = 0, hi = candidates.size();
    PerplexityResult at_hi;
    if (report.full_kld <= goal.target_kld) {  // the base model meets it already
      hi = 0;
      at_hi.mean_kld = report.full_kld;
      at_hi.kld_stderr = report.full_kld_stderr;
    } else {
      at_hi = measure(candidates, hi, base, upgrade, kld);
      ++out.evaluations;
    }
    out.met = at_hi.mean_kld <= goal.target_kld;
    while (out.met && lo < hi) {  // invariant: prefix hi meets the target, lo - 1 does not
      const std::size_t mid = (lo + hi) / 2;
      const PerplexityResult r = measure(candidates, mid, base, upgrade, kld);
      ++out.evaluations;
      if (r.mean_kld <= goal.target_kld) {
        hi = mid;
        at_hi = r;
      } else {
        lo = mid + 1;
      }
    }
    count = hi;
    result = at_hi;
  }
  out.kld = result.mean_kld;
  out.kld_stderr = result.kld_stderr;
  out.bytes = bytes_of(count);
  for (std::size_t i = 0; i < count; ++i) {
    out.upgraded.push_back(candidates[i].name);
    for (const std::string& pattern : layer_tensor_patterns(candidates[i].name))
      out.rules.push_back(
          parse_tensor_type_rule(pattern + "=" + upgraded_scheme.at(candidates[i].name)));
  }
  out.flags = rules_as_flags(out.rules);
  return out;
}

}  // namespace qforge
