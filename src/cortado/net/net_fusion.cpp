#include "cortado/net/net_fusion.hpp"

#include <algorithm>

#include "cortado/layers/layer_fusion.hpp"
#include "cortado/net/net.hpp"
#include "cortado/util/logging.hpp"

namespace cortado {

namespace {
bool touches(const BlobVec& v, const Blob* b) { return std::find(v.begin(), v.end(), b) != v.end(); }
}  // namespace

std::vector<FusedChain> FuseLayers(Net& net) {
  const auto& layers = net.layers();
  const auto& bottoms = net.bottom_vecs();
  const auto& tops = net.top_vecs();
  const auto& need = net.layer_need_backward();
  const auto& bottom_need = net.bottom_need_backward();
  const int n = static_cast<int>(layers.size());
  std::vector<FusedChain> chains;
  for (int h = 0; h < n; ++h) {
    LayerBase* head_layer = layers[h].get();
    auto* head = dynamic_cast<FusableLayer*>(head_layer);
    if (!head || head->fused_away() || tops[h].size() != 1 || head_layer->loss(0) != 0) continue;
    // Whether layer k may run in the head's pass: the head's types, no loss
    // weight, a backward exactly when the head's, propagating to its bottom
    // `to` (the chain's blob) then.
    const auto agrees = [&](int k, int to) {
      const LayerBase* l = layers[k].get();
      return l->forward_type() == head_layer->forward_type() && l->backward_type() == head_layer->backward_type() &&
             l->loss(0) == 0 && need[k] == need[h] && (!need[k] || bottom_need[k][to]);
    };
    const Blob* blob = tops[h][0];
    FusedChain chain{h, {}};
    int last = h;            // the chain's last layer
    bool contiguous = true;  // its layers are h, h + 1, ..., last
    for (int k = h + 1; k < n; ++k) {
      if (!touches(bottoms[k], blob) && !touches(tops[k], blob)) continue;
      LayerBase* tail_layer = layers[k].get();
      auto* tail = dynamic_cast<FusableLayer*>(tail_layer);
      if (tail && tail->fusion_role() == FusionRole::kResidualAdd) {
        // The residual add: the layer right after a chain of consecutive
        // layers (so its other bottom was computed before the head), adding
        // the blob to that other blob, into a top of its own.
        if (!contiguous || k != last + 1 || tail->fused_away() || bottoms[k].size() != 2 || tops[k].size() != 1) break;
        const int mine = bottoms[k][0] == blob ? 0 : 1, other = 1 - mine;
        Blob* out = tops[k][0];
        const bool fits = bottoms[k][mine] == blob && bottoms[k][other] != blob && out != blob &&
                          out != bottoms[k][other] && agrees(k, mine);
        if (!fits || !head->AbsorbResidual(tail_layer, bottoms[k][other], out, need[k] && bottom_need[k][other])) break;
        tail->set_fused_into(head_layer->name());
        chain.tails.push_back(k);
        last = k;
        blob = out;  // the chain goes on in place on the sum
        continue;
      }
      const bool in_place = bottoms[k].size() == 1 && tops[k].size() == 1 && bottoms[k][0] == blob &&
                            tops[k][0] == blob;
      const bool fits =
          tail && !tail->fused_away() && in_place && tail->fusion_role() != FusionRole::kNone && agrees(k, 0);
      if (!fits || !head->AbsorbTail(tail->fusion_role(), tail_layer)) break;
      tail->set_fused_into(head_layer->name());
      chain.tails.push_back(k);
      contiguous = contiguous && k == last + 1;
      last = k;
    }
    if (!chain.tails.empty()) chains.push_back(std::move(chain));
  }
  if (!chains.empty())
    INFO_LOG << "Network '" << net.name() << "': " << chains.size() << " fused chains (fuse_layers): "
             << FusionSummary(net, chains);
  return chains;
}

std::string FusionSummary(const Net& net, const std::vector<FusedChain>& chains) {
  std::string out;
  for (const FusedChain& c : chains) {
    out += (out.empty() ? "" : "; ") + net.layer_names()[c.head] + " <-";
    for (size_t i = 0; i < c.tails.size(); ++i) out += (i ? ", " : " ") + net.layer_names()[c.tails[i]];
  }
  return out;
}

}  // namespace cortado
