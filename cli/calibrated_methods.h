// The flags of the calibrated quantization methods, shared by every command that loads a
// model (run, bench, perplexity, quant-report, quantize -o), and the step that applies
// them to the opened file before its weights are built:
//
//   --smoothquant [--sq-alpha A|auto]  activation outliers moved into the weights (folded into
//                                norms, v and up), for the int8 activations
//   --awq [--no-awq-clip] [--awq-objective layer|block [--awq-block-chunks N]]
//                                activation-aware scales folded into norms and weights,
//                                then round-to-nearest with a clipping search
//   --gptq [--gptq-damp D] [--act-order]   (after --smoothquant / --awq when given)
//     with --calib FILE        one-shot: Hessians from a calibration file's Gram matrices
//     with --calib-text FILE   sequential: calibrated here, a block at a time, each block
//                              on what the already-quantized blocks compute
//                              (--calib-samples N chunks of --calib-ctx T tokens;
//                              --true-sequential: inside each block too)
//   --act static                 static W8A8: each block layer's int8 activation scale from
//                                the calibration maxima (after the methods above), no
//                                per-row max pass; --act auto: static where it rounds
//                                within 3x of per-token; --act dynamic: per token, also
//                                for a file that stores static scales (the default: as
//                                the file says)
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "model/runtime/llama_weights.h"
#include "model/runtime/model_loader.h"

namespace qforge::cli {

struct MethodOptions {
  bool smoothquant = false;
  std::string sq_alpha = "0.5";  // or "auto"
  bool awq = false;
  bool awq_clip = true;
  std::string awq_objective = "layer";
  int awq_block_chunks = 2;
  bool gptq = false;
  double gptq_damp = 0.01;
  bool act_order = false;
  bool true_sequential = false;
  std::string calib;       // a calibration file (qforge calibrate)
  std::string calib_text;  // a text to calibrate on here
  int calib_samples = 16;
  int calib_ctx = 0;  // 0: min(512, the model's context)
  std::string act;    // "" (as the file says), "dynamic" (clears a file's scales), "static", "auto"

  bool static_act() const { return act == "static" || act == "auto"; }
  bool any() const { return gptq || awq || smoothquant || static_act(); }
};

void add_method_options(CLI::App* cmd, MethodOptions& options);

// Checks the flags agree (throws naming the flag otherwise) and returns the step that
// applies them, or an empty function when no method is asked for. It reports what it did
// on stderr unless `quiet`.
ModelPreparer method_preparer(const MethodOptions& options, const Precision& precision, int threads,
                              bool quiet);

}  // namespace qforge::cli
