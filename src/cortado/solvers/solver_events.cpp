// The Solver's TensorBoard event file (solvers/solver.hpp, tensorboard_dir;
// util/event_writer.hpp writes the file): opening it, the scalars of the
// log lines, and the gradient histograms. The tags are docs/tensorboard.md's.
#include <string>

#include "cortado/solvers/solver.hpp"
#include "cortado/util/event_writer.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

void Solver::OpenEvents() {
  if (events_ || rank() != 0 || param_.tensorboard_dir().empty()) return;
  events_ = std::make_shared<EventWriter>(param_.tensorboard_dir());
  INFO_LOG << "TensorBoard events: " << events_->path();
}

std::string Solver::event_file() const { return events_ ? events_->path() : std::string(); }

void Solver::EventScalar(const std::string& tag, double value) {
  if (events_) events_->Scalar(tag, value, iter_);
}

void Solver::FlushEvents() {
  if (events_) events_->Flush();
}

bool Solver::HistogramsAt(int iter) const {
  const int every = param_.tensorboard_histogram_interval();
  return events_ && every >= 0 && (every == 0 || iter % every == 0);
}

void Solver::WriteGradientHistograms() {
  const std::vector<Blob*>& params = net_->learnable_params();
  if (grad_tags_.empty()) {
    // grad/<layer>/<parameter>: the parameter's name where the prototxt
    // gives one (param { name: ... }), else its index in the layer, as
    // Caffe's logs number them. A shared parameter is its owner's.
    grad_tags_.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      for (const auto& layer : net_->layers()) {
        const auto& blobs = layer->blobs();
        for (size_t j = 0; j < blobs.size() && grad_tags_[i].empty(); ++j) {
          if (blobs[j].get() != params[i]) continue;
          const LayerParameter& lp = layer->layer_param();
          const bool named = static_cast<int>(j) < lp.param_size() && !lp.param(static_cast<int>(j)).name().empty();
          grad_tags_[i] = str_cat("grad/", layer->name(), "/", named ? lp.param(static_cast<int>(j)).name() : std::to_string(j));
        }
        if (!grad_tags_[i].empty()) break;
      }
      if (grad_tags_[i].empty()) grad_tags_[i] = str_cat("grad/param", i);
    }
  }
  // The summed gradients hold S * iter_size * ranks times the gradient of
  // the mean loss (the unscale of ApplyUpdate's plan divides by the same).
  const double unscale = 1.0 / (static_cast<double>(loss_scale_) * param_.iter_size() * ranks());
  for (size_t i = 0; i < params.size(); ++i) {
    if (!reducer_->Trained(static_cast<int>(i))) continue;  // lr_mult 0: no gradient
    const Tensor& diff = params[i]->diff();
    EventHistogram h;
    // Read in the gradient's own type: no converted copy is cached.
    dispatch_type(diff.type(), [&](auto z) {
      using T = decltype(z);
      h.Add(static_cast<const T*>(diff.data_raw(type_of<T>())), params[i]->count(), unscale);
    });
    events_->Histogram(grad_tags_[i], h, iter_);
  }
}

std::string Solver::OutputTag(const std::string& group, const std::string& blob, size_t k, size_t count) {
  return count == 1 ? group + "/" + blob : str_cat(group, "/", blob, "/", k);
}

}  // namespace cortado
