// `qforge quant-report --svg`: each linear layer's sensitivity (the logits' mean KLD with
// only that layer quantized) as a bar, in forward order, coloured by layer kind.
//
//   KLD |      #
//       |  #   #       #
//       |  # # # #  #  # # ...
//       +------------------------ blk.0.attn_qkv ... output
#pragma once

#include <string>

#include "calib/quant_report.h"

namespace qforge::cli {

std::string sensitivity_svg(const QuantReport& report, const std::string& title);

}  // namespace qforge::cli
