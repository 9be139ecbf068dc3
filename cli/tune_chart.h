// `qforge tune --svg`: the tuner's measurements on a roofline.
//
//   GOPS (log)                         x  operations per packed weight byte = 2 M N K / bytes
//     |            ______________ dot peak
//     |          /   o -> *            y  2 M N K per second
//     |        /  read bandwidth x intensity
//     +------------------------- ops/byte (log)
//   o default blocking, * tuned; one pair per kernel and M.
#pragma once

#include <string>

#include "ops/tune/tuner.h"

namespace qforge::cli {

std::string roofline_svg(const TuneReport& report, const MachineLimits& limits,
                         const std::string& title);

}  // namespace qforge::cli
