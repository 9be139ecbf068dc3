// The calibration pass: a model run over `samples` chunks of `ctx` tokens of a text,
// recording every linear input (calib/activation_stats.h). It runs a block at a time
// over all chunks, so only one block's accumulators (and Gram matrices) live at once:
//
//   residual[s] = embedding(chunk s)                    samples x ctx x dim floats
//   for block l:  for chunk s:  residual[s] = block_l(residual[s])   (observing its 4 inputs)
//                 -> the 4 sites of block l, finished and handed to `sink`
//                 block_done(l): again -> the block re-run on its inputs, observed;
//                 advance -> residual = block_l'(the block's inputs), not observed
//   for chunk s:  head(residual[s])                                   (observing its input)
//                 -> the classifier's site          (HeadSite::skip: not run at all)
//
// Each chunk starts with BOS at position 0, as perplexity's chunks do; what every block
// computes is what forward() computes for that chunk, bit for bit.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "calib/activation_stats.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_executor.h"
#include "model/runtime/llama_weights.h"

namespace qforge {

// `samples` chunks of `ctx` tokens from `tokens` (which start with BOS, or bos = -1 when the
// vocabulary has none: the text's token stands there): chunk i is BOS followed by tokens [1 + i
// (ctx - 1), 1 + (i + 1)(ctx - 1)). Throws naming `text_path` when the text holds fewer than one
// chunk; fewer than `samples`: as many as it holds.
std::vector<std::vector<int>> calibration_chunks(std::span<const int> tokens, int samples, int ctx,
                                                 int bos, const std::string& text_path);

// By value: a sink may keep the statistics (Gram matrices included) without a copy.
using SiteSink = std::function<void(SiteStatistics)>;
using CalibrationProgress = std::function<void(int done, int total)>;
// What the pass does after block `layer`'s four sites reached the sink (a sequential
// method changes the block's layers there):
//   next      on to the next block
//   again     run the block again from the same inputs, observing (its sites reach the
//             sink anew, then block_done again)
//   advance   run the block again from the same inputs, not observing, then on: the next
//             block sees what the changed block computes
enum class BlockStep { next, again, advance };
// Inside block_done: runs the block (with the layers it holds now) again from its inputs,
// over the first `chunks` chunks (all of them when fewer), not observing, and returns what
// it computes: chunks x ctx x dim floats, chunk-major. A method measures a candidate layer
// by the block output it gives (calib/awq_model.h).
using BlockRerun = std::function<std::vector<float>(int chunks)>;
using BlockDone = std::function<BlockStep(int layer, const BlockRerun& rerun)>;

// Whether the pass ends with the classifier's site (a full-vocabulary forward of every
// calibration token) or stops after the last block.
enum class HeadSite { observe, skip };

// The sites of one block by name ("blk.3.attn_qkv", ...).
using BlockSites = std::map<std::string, SiteStatistics, std::less<>>;
using ModelBlockDone = std::function<BlockStep(int layer, const BlockSites& sites,
                                               LlamaWeights& weights, const BlockRerun& rerun)>;

// The calibration pass over the f32 model of `model` (built here, `threads` threads),
// for the calibrated methods: each block's four sites reach `block_done` together, with
// the weights the pass runs (a sequential method swaps their layers). The head is not
// run: the classifier's site is not needed.
void calibrate_model_blocks(const ModelFile& model, const std::vector<std::vector<int>>& chunks,
                            bool gram, int threads, const ModelBlockDone& block_done,
                            const CalibrationProgress& progress = {}, int sample_rows = 0);

// The executor's cache must hold `ctx` positions. Sites reach `sink` in forward order.
// sample_rows > 0: each block site also keeps that many of its input rows, spread over
// the chunks (SiteStatistics::samples).
void run_calibration(LlamaExecutor& executor, const LlamaConfig& config,
                     const std::vector<std::vector<int>>& chunks, bool gram, const SiteSink& sink,
                     const CalibrationProgress& progress = {}, const BlockDone& block_done = {},
                     int sample_rows = 0, HeadSite head = HeadSite::observe);

}  // namespace qforge
