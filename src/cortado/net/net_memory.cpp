// ShareDiffBuffers (net_memory.hpp): the spans of the diffs in backward, and
// a greedy assignment of buffers per size. ShareDataBuffers: the residual
// sums computed in a bottom nobody reads after them.
#include "cortado/net/net_memory.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "cortado/layer_traits.hpp"
#include "cortado/layers/layer_fusion.hpp"
#include "cortado/net/net.hpp"

namespace cortado {

namespace {

// A set of blobs with one diff buffer today (one blob, or a view and its
// source), with what backward does to it.
struct Group {
  std::vector<Blob*> blobs;
  size_t count = 0;
  int lo = -1, hi = -1;   // the span: first and last layer (net order) touching it in backward
  bool written = false;   // some layer writes it in backward
  bool read = false;      // some layer reads it in backward
  bool unwritten = false;  // a consumer reads it as a bottom without writing its diff
  bool keep = false;      // must keep its own buffer
};

// For each layer, the head of the fused chain it is a tail of; -1: none.
std::vector<int> FusedHeads(const Net& net) {
  std::map<std::string, int> index;
  for (size_t i = 0; i < net.layer_names().size(); ++i) index[net.layer_names()[i]] = static_cast<int>(i);
  std::vector<int> head(net.layers().size(), -1);
  for (size_t i = 0; i < net.layers().size(); ++i) {
    const auto* tail = dynamic_cast<const FusableLayer*>(net.layers()[i].get());
    if (tail && tail->fused_away()) head[i] = index.at(tail->fused_into());
  }
  return head;
}

}  // namespace

DiffSharingStats ShareDiffBuffers(Net& net) {
  DiffSharingStats stats;
  const auto& layers = net.layers();
  const int n = static_cast<int>(layers.size());
  const auto& need = net.layer_need_backward();
  if (std::none_of(need.begin(), need.end(), [](bool b) { return b; })) return stats;

  // Groups by the diff tensor the blobs hold now.
  std::map<const Tensor*, int> group_of_tensor;
  std::map<const Blob*, int> group_of_blob;
  std::vector<Group> groups;
  for (const auto& b : net.blobs()) {
    const Tensor* t = &b->diff();
    auto it = group_of_tensor.find(t);
    if (it == group_of_tensor.end()) {
      it = group_of_tensor.emplace(t, static_cast<int>(groups.size())).first;
      groups.emplace_back();
      groups.back().count = b->count();
    }
    Group& g = groups[static_cast<size_t>(it->second)];
    g.blobs.push_back(b.get());
    if (b->count() != g.count) g.keep = true;  // a view of another size: leave it as it is
    group_of_blob[b.get()] = it->second;
  }
  auto group = [&](const Blob* b) -> Group& { return groups[static_cast<size_t>(group_of_blob.at(b))]; };

  for (const Blob* b : net.input_blobs()) group(b).keep = true;
  for (const Blob* b : net.output_blobs()) group(b).keep = true;
  for (size_t i = 0; i < net.blobs().size(); ++i)
    if (net.blob_loss_weight(static_cast<int>(i)) != 0) group(net.blobs()[i].get()).keep = true;

  // A fused tail's work is done in its head's pass (net_fusion.hpp). Where
  // the head's pass takes no aliased operands (fused_pass_may_alias():
  // cuDNN's BatchNorm), what the tail touches the head touches too: for the
  // residual add that puts the sum's gradient in the head's span, so that
  // the head's input gradient never shares the sum's buffer. The layers' own
  // kernels allow that sharing, which saves about a gradient buffer per
  // residual block (ResNet-50: 9.3M values per 2 images instead of 12.3M).
  std::vector<int> head = FusedHeads(net);
  for (int& h : head)
    if (h >= 0 && dynamic_cast<const FusableLayer&>(*net.layers()[static_cast<size_t>(h)]).fused_pass_may_alias()) h = -1;
  auto touch = [&](Group& g, int layer) {
    for (int at : {layer, head[static_cast<size_t>(layer)]}) {
      if (at < 0) continue;
      g.lo = g.lo < 0 ? at : std::min(g.lo, at);
      g.hi = std::max(g.hi, at);
    }
  };
  for (int i = 0; i < n; ++i) {
    const BlobVec& bottoms = net.bottom_vecs()[i];
    const BlobVec& tops = net.top_vecs()[i];
    for (size_t j = 0; j < bottoms.size(); ++j) {
      Group& g = group(bottoms[j]);
      const bool writes = need[i] && net.bottom_need_backward()[i][j];
      if (writes) {
        g.written = true;
        touch(g, i);
      } else {
        g.unwritten = true;
      }
    }
    if (!need[i]) continue;
    for (const Blob* t : tops) {
      Group& g = group(t);
      g.read = true;
      touch(g, i);
    }
  }
  for (Group& g : groups) {
    if (g.read && g.unwritten) g.keep = true;  // its diff must stay zero where nobody writes it
    if (!g.written || g.count == 0) g.keep = true;  // no buffer in use in backward, or nothing to share
  }

  // Backward runs from the last layer to the first: a group's life in
  // backward starts at hi and ends at lo. Greedy in that order, per count:
  // a buffer is free for a group once the buffer's last group ended at a
  // layer after the group's start (lo_prev > hi).
  std::vector<int> order;
  for (size_t k = 0; k < groups.size(); ++k)
    if (!groups[k].keep) order.push_back(static_cast<int>(k));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return groups[static_cast<size_t>(a)].hi > groups[static_cast<size_t>(b)].hi;
  });
  struct Buffer {
    Blob* owner;   // the first group's first blob: its diff tensor is the buffer
    int free_below;  // the last group's lo: usable by a group whose hi is below it
  };
  std::map<size_t, std::vector<Buffer>> buffers;  // by count
  for (int k : order) {
    Group& g = groups[static_cast<size_t>(k)];
    stats.groups += 1;
    stats.values_before += g.count;
    std::vector<Buffer>& pool = buffers[g.count];
    Buffer* use = nullptr;
    for (Buffer& buf : pool) {
      if (g.hi < buf.free_below) {
        use = &buf;
        break;
      }
    }
    if (!use) {
      pool.push_back({g.blobs.front(), g.lo});
      stats.buffers += 1;
      stats.values_after += g.count;
      for (Blob* b : g.blobs) b->ShareDiff(*g.blobs.front());
      continue;
    }
    use->free_below = g.lo;
    for (Blob* b : g.blobs) b->ShareDiff(*use->owner);
  }
  return stats;
}

namespace {
// Whether B's data may be overwritten once layer `at` has read it in forward:
// see net_memory.hpp.
bool DeadAfter(const Net& net, const Blob* b, int at) {
  const auto& need = net.layer_need_backward();
  for (int k = 0; k < static_cast<int>(net.layers().size()); ++k) {
    const BlobVec& bottoms = net.bottom_vecs()[static_cast<size_t>(k)];
    const BlobVec& tops = net.top_vecs()[static_cast<size_t>(k)];
    const bool as_top = std::find(tops.begin(), tops.end(), b) != tops.end();
    const bool as_bottom = std::find(bottoms.begin(), bottoms.end(), b) != bottoms.end();
    if (k == at || (!as_top && !as_bottom)) continue;
    if (k > at) return false;
    if (!need[static_cast<size_t>(k)]) continue;
    if (!as_top) return false;  // another consumer, which may read it backward
    if (BackwardReadsTopData(net.layers()[static_cast<size_t>(k)]->layer_param())) return false;
  }
  return true;
}
}  // namespace

DataSharingStats ShareDataBuffers(Net& net) {
  DataSharingStats stats;
  const auto& need = net.layer_need_backward();
  if (std::none_of(need.begin(), need.end(), [](bool b) { return b; })) return stats;
  // How many blobs hold each data tensor: the net's, and the layers' parameters.
  std::map<const Tensor*, int> holders;
  for (const auto& b : net.blobs()) holders[&b->data()] += 1;
  for (const auto& layer : net.layers())
    for (const auto& p : layer->blobs()) holders[&p->data()] += 1;
  std::set<const Blob*> fixed(net.input_blobs().begin(), net.input_blobs().end());
  fixed.insert(net.output_blobs().begin(), net.output_blobs().end());
  for (size_t i = 0; i < net.blobs().size(); ++i)
    if (net.blob_loss_weight(static_cast<int>(i)) != 0) fixed.insert(net.blobs()[i].get());
  const std::vector<int> head = FusedHeads(net);
  for (int i = 0; i < static_cast<int>(net.layers().size()); ++i) {
    const BlobVec& bottoms = net.bottom_vecs()[static_cast<size_t>(i)];
    const BlobVec& tops = net.top_vecs()[static_cast<size_t>(i)];
    if (tops.size() != 1 || !SumsIntoBottom(net.layers()[static_cast<size_t>(i)]->layer_param())) continue;
    // A residual add fused into a head whose pass takes no aliased operands
    // (cuDNN's BatchNorm) keeps its sum in memory of its own.
    const int h = head[static_cast<size_t>(i)];
    if (h >= 0 && !dynamic_cast<const FusableLayer&>(*net.layers()[static_cast<size_t>(h)]).fused_pass_may_alias())
      continue;
    Blob* top = tops[0];
    if (std::find(bottoms.begin(), bottoms.end(), top) != bottoms.end()) continue;  // in place already
    for (Blob* b : bottoms) {
      if (std::count(bottoms.begin(), bottoms.end(), b) != 1 || fixed.count(b) || holders[&b->data()] != 1 ||
          b->count() != top->count() || b->count() == 0 || !DeadAfter(net, b, i))
        continue;
      holders[&b->data()] -= 1;
      b->ShareData(*top);
      holders[&top->data()] += 1;
      stats.blobs += 1;
      stats.values += b->count();
      break;  // one bottom gives the memory
    }
  }
  return stats;
}

int BatchNormOutOfPlace(NetParameter* param) {
  std::set<std::string> names;
  for (const LayerParameter& lp : param->layer()) {
    names.insert(lp.bottom().begin(), lp.bottom().end());
    names.insert(lp.top().begin(), lp.top().end());
  }
  const auto touches = [](const LayerParameter& lp, const std::string& b) {
    return std::find(lp.bottom().begin(), lp.bottom().end(), b) != lp.bottom().end() ||
           std::find(lp.top().begin(), lp.top().end(), b) != lp.top().end();
  };
  int changed = 0;
  for (int i = 0; i < param->layer_size(); ++i) {
    LayerParameter& bn = *param->mutable_layer(i);
    if (bn.type() != "BatchNorm" || bn.bottom_size() != 1 || bn.top_size() != 1 || bn.bottom(0) != bn.top(0))
      continue;
    const std::string b = bn.bottom(0);
    int p = i - 1;  // the last layer before the BatchNorm that touches B
    while (p >= 0 && !touches(param->layer(p), b)) --p;
    if (p < 0) continue;
    LayerParameter& producer = *param->mutable_layer(p);
    const bool writes = std::find(producer.top().begin(), producer.top().end(), b) != producer.top().end();
    const bool reads = std::find(producer.bottom().begin(), producer.bottom().end(), b) != producer.bottom().end();
    if (!writes || reads || producer.bottom_size() == 0) continue;
    std::string renamed = b + "/bn_input";
    for (int k = 2; names.count(renamed); ++k) renamed = str_cat(b, "/bn_input", k);
    names.insert(renamed);
    for (int t = 0; t < producer.top_size(); ++t)
      if (producer.top(t) == b) producer.set_top(t, renamed);
    bn.set_bottom(0, renamed);
    ++changed;
  }
  return changed;
}

namespace {
// "12.3M": a count of values in millions, one decimal (truncated).
std::string Millions(size_t v) { return str_cat(static_cast<double>(static_cast<int64_t>(v / 100000)) / 10.0, "M"); }
}  // namespace

std::string DataSharingSummary(const DataSharingStats& s) {
  return str_cat(s.blobs, " blobs computed in their consumer's top: ", Millions(s.values), " values saved");
}

std::string DiffSharingSummary(const DiffSharingStats& s) {
  return str_cat(s.buffers, " diff buffers for ", s.groups, " blobs' gradients: ", Millions(s.values_after),
                 " values instead of ", Millions(s.values_before));
}

}  // namespace cortado
