#include "cortado/layers/recurrent_layer.hpp"

#include <climits>

#include "cortado/layers/filler.hpp"

namespace cortado {

template <typename Ftype, typename Btype>
void RecurrentLayer<Ftype, Btype>::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const RecurrentParameter& p = this->layer_param().recurrent_param();
  if (!p.has_num_output() || p.num_output() == 0 || p.num_output() > static_cast<uint32_t>(INT_MAX / 4)) {
    this->field_error("recurrent_param.num_output", "must be set and in 1..", INT_MAX / 4, ", got ",
                      p.num_output());
  }
  for (const auto& [filler, field] : {std::pair{&p.weight_filler(), "recurrent_param.weight_filler"},
                                      std::pair{&p.bias_filler(), "recurrent_param.bias_filler"}}) {
    try {
      ValidateFiller(*filler, "");
    } catch (const Error& e) {
      this->field_error(std::string(field) + ".type", e.what());
    }
  }
  H_ = static_cast<int>(p.num_output());
  expose_hidden_ = p.expose_hidden();
  const int states = expose_hidden_ ? num_states() : 0;
  const int extra = static_cast<int>(bottom.size()) - 2 - states;
  if (extra < 0 || extra > 1) {
    this->field_error("bottom", "expected x, cont", ", an optional static input",
                      expose_hidden_ ? str_cat(" and ", num_states(), " initial state(s) (expose_hidden)") : "",
                      ": got ", bottom.size(), " bottoms");
  }
  static_input_ = extra == 1;
  first_state_bottom_ = 2 + extra;
  if (bottom[0]->num_axes() < 2) {
    this->field_error("bottom", "x must have at least 2 axes (T, N, ...), got shape ", bottom[0]->shape_string());
  }
  I_ = static_cast<int>(bottom[0]->count(2));
  I_static_ = static_input_ ? static_cast<int>(bottom[2]->count(1)) : 0;

  const std::vector<ParamSpec> specs = param_specs(H_, I_, I_static_);
  auto& blobs = this->blobs_;
  if (!blobs.empty()) {
    if (blobs.size() != specs.size()) {
      this->field_error("blobs", "expected ", specs.size(), " parameter blobs, got ", blobs.size());
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      if (blobs[i]->shape() != specs[i].shape) {
        this->field_error("blobs", specs[i].name, " has shape ", blobs[i]->shape_string(), ", expected ",
                          shape_string(specs[i].shape), " (num_output ", H_, ", input size ", I_,
                          static_input_ ? str_cat(", static input size ", I_static_) : "", ")");
      }
    }
  } else {
    for (const ParamSpec& s : specs) {
      blobs.push_back(this->make_param(s.shape));
      if (s.bias) {
        Fill(p.bias_filler(), blobs.back().get(), "recurrent_param.bias_filler");
      } else {
        Fill(p.weight_filler(), blobs.back().get(), "recurrent_param.weight_filler");
      }
    }
  }
  this->param_propagate_down_.assign(blobs.size(), true);
}

template <typename Ftype, typename Btype>
void RecurrentLayer<Ftype, Btype>::Reshape(const BlobVec& bottom, const BlobVec& top) {
  const Blob& x = *bottom[0];
  if (x.num_axes() < 2 || x.count(2) != static_cast<size_t>(I_)) {
    this->field_error("bottom", "x has shape ", x.shape_string(), "; the layer was set up for (T, N, ...) with ",
                      I_, " inputs per step");
  }
  for (size_t i = 0; i < bottom.size(); ++i) {
    for (const Blob* t : top) {
      if (bottom[i] == t) this->field_error("top", "a recurrent layer cannot be computed in place");
    }
  }
  T_ = x.shape(0);
  N_ = x.shape(1);
  if (T_ == 0) this->field_error("bottom", "x has shape ", x.shape_string(), ": at least one time step is needed");
  const std::vector<int> cont_shape{T_, N_};
  if (bottom[1]->shape() != cont_shape) {
    this->field_error("bottom", "cont (bottom[1]) has shape ", bottom[1]->shape_string(), "; x of shape ",
                      x.shape_string(), " needs (T, N) = ", shape_string(cont_shape));
  }
  if (static_input_) {
    const Blob& s = *bottom[2];
    if (s.num_axes() < 1 || s.shape(0) != N_ || s.count(1) != static_cast<size_t>(I_static_)) {
      this->field_error("bottom", "the static input (bottom[2]) has shape ", s.shape_string(), "; expected ", N_,
                        " rows of ", I_static_, " values");
    }
  }
  const std::vector<int> state_shape{1, N_, H_};
  if (expose_hidden_) {
    for (int k = 0; k < num_states(); ++k) {
      const Blob& s = *bottom[first_state_bottom_ + k];
      if (s.shape() != state_shape) {
        this->field_error("bottom", "initial state bottom[", first_state_bottom_ + k, "] has shape ",
                          s.shape_string(), ", expected ", shape_string(state_shape));
      }
    }
    for (int k = 0; k < num_states(); ++k) top[1 + k]->Reshape(state_shape);
  }
  top[0]->Reshape({T_, N_, H_});
  const size_t tn = static_cast<size_t>(T_) * N_;
  if (ones_.count() != tn) {
    ones_.Reshape({static_cast<int>(tn)});
    M* one = ones_.mutable_cpu_data<M>();
    for (size_t i = 0; i < tn; ++i) one[i] = M(1);
  }
  zeros_.Reshape({N_, H_});  // never written: zero from its allocation on
  ReshapeBuffers();
}

template <typename Ftype, typename Btype>
void RecurrentLayer<Ftype, Btype>::CheckNoContGradient(const std::vector<bool>& propagate_down) const {
  if (propagate_down.size() > 1 && propagate_down[1]) {
    this->field_error("bottom", "cannot back-propagate to the sequence continuation indicators (bottom[1], cont);"
                      " give it propagate_down: false or feed it from a layer without parameters");
  }
}

CORTADO_INSTANTIATE_LAYER(RecurrentLayer);

}  // namespace cortado
