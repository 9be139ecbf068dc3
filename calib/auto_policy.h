// `--auto-policy`: per-layer schemes chosen from the sensitivity report. Every layer
// starts at the base scheme (--quant); layers are upgraded to `upgrade` (int8 unless
// given) greedily, the most KLD per byte first:
//
//   candidates  layers whose scheme would change, sorted by
//               sensitivity_kld / (upgraded bytes - base bytes), largest first
//   --target-kld X   the shortest prefix of candidates whose measured KLD is <= X
//                    (a binary search; each step swaps the prefix's upgraded layers into
//                    the base model and measures it against the f32 logits)
//   --max-bytes B    the longest prefix whose linear-layer bytes are <= B
//
// The result prints as the flags that reproduce it (`--tensor-type blk.3.ffn_down=int8`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "calib/kld_evaluator.h"
#include "calib/quant_report.h"
#include "model/runtime/model_session.h"

namespace qforge {

struct AutoPolicyGoal {
  double target_kld = 0;        // > 0: meet this
  std::uint64_t max_bytes = 0;  // > 0: fit in this many bytes of linear layers
};

struct AutoPolicy {
  std::vector<std::string> upgraded;                // layer names, in the order chosen
  std::vector<TensorRule> rules;                    // what to add to the base precision's rules
  std::string flags;                                // the rules as command-line flags
  double kld = 0, kld_stderr = 0;                   // measured with the policy
  std::uint64_t bytes = 0;                          // linear layers' bytes with the policy
  std::uint64_t base_bytes = 0, upgrade_bytes = 0;  // every layer base / upgraded
  bool met = false;                                 // the goal was reached
  int evaluations = 0;                              // models measured
};

// `base` and `upgrade` are sessions of the same model (the base and the upgrade scheme);
// `report` is the base model's report. Layers are swapped between the two sessions while
// measuring and are back in place afterwards.
AutoPolicy choose_auto_policy(const QuantReport& report, ModelSession& base, ModelSession& upgrade,
                              const KldEvaluator& kld, const AutoPolicyGoal& goal);

}  // namespace qforge
