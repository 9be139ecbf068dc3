#include "calib/calibrator.h"

#include <algorithm>
#include <memory>

#include "jit/base/error.h"
#include "ops/linear/thread_pool.h"

namespace qforge {
namespace {

// Routes each observed input of one block (or the head) to its site's accumulator.
class BlockObserver final : public LinearInputObserver {
 public:
  BlockObserver(int layer, std::vector<SiteAccumulator*> sites) : layer_(layer), sites_(sites) {}
  void observe(int layer, LinearSite site, const float* x, int rows, int k) override {
    QF_REQUIRE(layer == layer_, "calibration: block ", layer, " observed while running ", layer_);
    SiteAccumulator* s = sites_[static_cast<std::size_t>(
        site == LinearSite::classifier ? 0 : static_cast<int>(site))];
    QF_REQUIRE(s->k() == k, "calibration: ", s->name(), " input of width ", k);
    s->add(x, rows);
  }

 private:
  int layer_;
  std::vector<SiteAccumulator*> sites_;
};

}  // namespace

std::vector<std::vector<int>> calibration_chunks(std::span<const int> tokens, int samples, int ctx,
                                                 int bos, const std::string& text_path) {
  QF_REQUIRE(ctx >= 2, "--ctx ", ctx, ": a calibration chunk needs at least 2 tokens");
  QF_REQUIRE(samples >= 1, "--samples ", samples, ": at least 1");
  const std::size_t body = static_cast<std::size_t>(ctx) - 1;
  const std::size_t available = tokens.size() > 1 ? (tokens.size() - 1) / body : 0;
  QF_REQUIRE(available >= 1, text_path, ": ", tokens.size(),
             " tokens, fewer than one calibration chunk of --ctx ", ctx);
  const std::size_t count = std::min(available, static_cast<std::size_t>(samples));
  std::vector<std::vector<int>> chunks(count);
  for (std::size_t i = 0; i < count; ++i) {
    chunks[i].push_back(bos >= 0 ? bos : tokens[i * body]);  // no BOS: the text's own token
    const auto first = tokens.begin() + static_cast<std::ptrdiff_t>(1 + i * body);
    chunks[i].insert(chunks[i].end(), first, first + static_cast<std::ptrdiff_t>(body));
  }
  return chunks;
}

void run_calibration(LlamaExecutor& executor, const LlamaConfig& c,
                     const std::vector<std::vector<int>>& chunks, bool gram, const SiteSink& sink,
                     const CalibrationProgress& progress, const BlockDone& block_done,
                     int sample_rows, HeadSite head) {
  QF_REQUIRE(!chunks.empty(), "calibration: no chunks");
  const int ctx = static_cast<int>(chunks.front().size());
  QF_REQUIRE(ctx <= executor.positions(), "calibration: --ctx ", ctx, " exceeds the context of ",
             executor.positions());
  const auto dim = static_cast<std::size_t>(c.dim);
  constexpr int kRows = LlamaExecutor::kChunkRows;
  // Every chunk's residual stream, between blocks.
  std::vector<float> residual(chunks.size() * static_cast<std::size_t>(ctx) * dim);
  auto rows_of = [&](std::size_t s, int p0) {
    return residual.data() +
           (s * static_cast<std::size_t>(ctx) + static_cast<std::size_t>(p0)) * dim;
  };
  for (std::size_t s = 0; s < chunks.size(); ++s) {
    QF_REQUIRE(static_cast<int>(chunks[s].size()) == ctx, "calibration: chunks differ in length");
    executor.embed_rows(chunks[s], rows_of(s, 0));
  }
  std::vector<float> inputs;  // with block_done: the current block's inputs
  const int total = c.n_layers + (head == HeadSite::observe ? 1 : 0);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    if (block_done) inputs = residual;
    const auto run_block = [&] {
      for (std::size_t s = 0; s < chunks.size(); ++s)
        for (int p0 = 0; p0 < ctx; p0 += kRows)
          executor.forward_block(l, rows_of(s, p0), std::min(kRows, ctx - p0), p0);
    };
    const BlockRerun rerun = [&](int count) {
      const std::size_t n = std::min(chunks.size(), static_cast<std::size_t>(std::max(0, count)));
      const std::size_t floats = static_cast<std::size_t>(ctx) * dim;
      std::vector<float> out(inputs.begin(),
                             inputs.begin() + static_cast<std::ptrdiff_t>(n * floats));
      for (std::size_t s = 0; s < n; ++s)
        for (int p0 = 0; p0 < ctx; p0 += kRows)
          executor.forward_block(l, out.data() + s * floats + static_cast<std::size_t>(p0) * dim,
                                 std::min(kRows, ctx - p0), p0);
      return out;
    };
    BlockStep step = BlockStep::again;
    while (step == BlockStep::again) {
      if (block_done) residual = inputs;
      // In LinearSite order: qkv, wo, gate_up, down.
      std::vector<std::unique_ptr<SiteAccumulator>> sites;
      for (LinearSite site :
           {LinearSite::qkv, LinearSite::wo, LinearSite::gate_up, LinearSite::down})
        sites.push_back(std::make_unique<SiteAccumulator>(
            prefix + site_name(site), site == LinearSite::down ? c.hidden_dim : c.dim, gram,
            sample_rows, chunks.size() * static_cast<std::uint64_t>(ctx)));
      BlockObserver observer(l, {sites[0].get(), sites[1].get(), sites[2].get(), sites[3].get()});
      executor.set_observer(&observer);
      run_block();
      executor.set_observer(nullptr);
      for (auto& site : sites) sink(site->finish());
      sites.clear();  // the Gram matrices, before the block's method needs memory
      step = block_done ? block_done(l, rerun) : BlockStep::next;
    }
    if (step == BlockStep::advance) {
      residual = inputs;
      run_block();
    }
    if (progress) progress(l + 1, total);
  }
  if (head == HeadSite::skip) return;
  SiteAccumulator classifier("output", c.dim, gram);
  BlockObserver observer(-1, {&classifier});
  executor.set_observer(&observer);
  for (std::size_t s = 0; s < chunks.size(); ++s)
    for (int p0 = 0; p0 < ctx; p0 += kRows)
      executor.forward_head(rows_of(s, p0), std::min(kRows, ctx - p0), nullptr);
  executor.set_observer(nullptr);
  sink(classifier.finish());
  if (progress) progress(total, total);
}

void calibrate_model_blocks(const ModelFile& model, const std::vector<std::vector<int>>& chunks,
                            bool gram, int threads, const ModelBlockDone& block_done,
                            const CalibrationProgress& progress, int sample_rows) {
  QF_REQUIRE(!chunks.empty(), "calibration: no chunks");
  const int ctx = static_cast<int>(chunks.front().size());
  LlamaWeights weights = build_llama_weights(model, parse_precision("f32"), threads);
  ThreadPool pool(threads);
  LlamaExecutor executor(weights, pool, ctx);
  BlockSites sites;
  run_calibration(
      executor, model.config(), chunks, gram,
      [&](SiteStatistics s) {
        std::string name = s.name;
        sites.insert_or_assign(std::move(name), std::move(s));
      },
      progress,
      [&](int l, const BlockRerun& rerun) {
        const BlockStep step = block_done(l, sites, weights, rerun);
        sites.clear();
        return step;
      },
      sample_rows, HeadSite::skip);
}

}  // namespace qforge
