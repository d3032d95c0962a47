// The layout plan (net_layout.hpp).
#include "cortado/net/net_layout.hpp"

#include <algorithm>
#include <map>

#include "cortado/common.hpp"
#include "cortado/layer_traits.hpp"
#include "cortado/types.hpp"

namespace cortado {

namespace {

// Union-find over blob names.
class Groups {
 public:
  int id(const std::string& name) {
    auto it = index_.find(name);
    if (it != index_.end()) return it->second;
    const int i = static_cast<int>(parent_.size());
    parent_.push_back(i);
    index_.emplace(name, i);
    return i;
  }
  int find(int i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  void join(int a, int b) { parent_[find(a)] = find(b); }
  // The group of a name, -1 when no layer of a role other than NCHW-only touched it.
  int group_of(const std::string& name) {
    auto it = index_.find(name);
    return it == index_.end() ? -1 : find(it->second);
  }
  const std::map<std::string, int>& names() const { return index_; }

 private:
  std::map<std::string, int> index_;
  std::vector<int> parent_;
};

bool Contains(const google::protobuf::RepeatedPtrField<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

bool LayoutPlanWanted(NetParameter::ChannelsLast mode, bool on_gpu, bool* half_only) {
  *half_only = mode != NetParameter::ALL;
  return mode == NetParameter::ALL || (mode == NetParameter::GPU_16BIT && on_gpu);
}

LayoutPlan PlanLayouts(NetParameter* param, bool half_only, std::vector<int>* origin) {
  const int n = param->layer_size();
  std::vector<LayoutRole> role(n);
  Groups groups;
  std::set<std::string> all_names, consumed;
  for (int i = 0; i < n; ++i) {
    const LayerParameter& lp = param->layer(i);
    LayoutRole r = LayerLayoutRole(lp);
    if (half_only && (r == kNhwcCapable || r == kNhwcAnchor) &&
        !(is_half_type(lp.forward_type()) && is_half_type(lp.backward_type())))
      r = kNchwOnly;
    role[i] = r;
    for (const std::string& b : lp.bottom()) {
      all_names.insert(b);
      if (!Contains(lp.top(), b)) consumed.insert(b);
    }
    all_names.insert(lp.top().begin(), lp.top().end());
    if (r == kNchwOnly) continue;
    if (r == kNhwcSource) {  // its first top only, in a group of its own until a reader joins it
      if (lp.bottom_size() == 0 && lp.top_size() > 0) groups.id(lp.top(0));
      else role[i] = kNchwOnly;
      continue;
    }
    int first = -1;
    for (const auto* names : {&lp.bottom(), &lp.top()}) {
      for (const std::string& b : *names) {
        const int g = groups.id(b);
        if (first < 0) first = g;
        groups.join(g, first);
      }
    }
  }
  // What each group may be: anchored, and not forbidden.
  std::map<int, bool> anchored, forbidden;
  for (int i = 0; i < n; ++i) {
    const LayerParameter& lp = param->layer(i);
    for (const auto* names : {&lp.bottom(), &lp.top()}) {
      for (const std::string& b : *names) {
        const int g = groups.group_of(b);
        if (g < 0) continue;
        if (role[i] == kNhwcAnchor) anchored[g] = true;
      }
    }
  }
  for (const auto& [name, id] : groups.names()) {
    if (!consumed.count(name)) forbidden[groups.find(id)] = true;  // an output of the net
  }
  LayoutPlan plan;
  std::set<int> nhwc_groups;
  for (const auto& [g, yes] : anchored) {
    if (yes && !forbidden[g]) nhwc_groups.insert(g);
  }
  plan.groups = static_cast<int>(nhwc_groups.size());
  if (nhwc_groups.empty()) {
    if (origin) {
      origin->resize(n);
      for (int i = 0; i < n; ++i) (*origin)[i] = i;
    }
    return plan;
  }
  const auto nhwc = [&](const std::string& b) { return nhwc_groups.count(groups.group_of(b)) > 0; };
  std::set<std::string> layer_names;
  for (const LayerParameter& lp : param->layer()) layer_names.insert(lp.name());
  const auto fresh = [](std::set<std::string>* used, const std::string& base) {
    std::string s = base;
    for (int k = 2; used->count(s); ++k) s = str_cat(base, "_", k);
    used->insert(s);
    return s;
  };
  const auto convert = [&](const LayerParameter& like, const std::string& from, const std::string& to) {
    LayerParameter c;
    c.set_name(fresh(&layer_names, to));
    c.set_type("LayoutConvert");
    c.add_bottom(from);
    c.add_top(to);
    c.set_forward_type(like.forward_type());
    c.set_backward_type(like.backward_type());
    c.set_forward_math(like.forward_math());
    c.set_backward_math(like.backward_math());
    c.set_phase(like.phase());
    ++plan.conversions;
    return c;
  };
  for (const auto& [name, id] : groups.names()) {
    if (nhwc(name)) plan.nhwc.insert(name);
  }
  // After an NCHW-only layer writes blob b (out of place, or in place on an
  // NCHW copy of it): nchw_name[b], its NCHW values, which NCHW-only layers
  // read without a conversion (until a group layer writes b in place), and
  // pending[b], the conversion to NHWC made when a group layer first reads
  // b (none when only NCHW-only layers do: a conversion is never a second
  // consumer of a blob, nor an output of the net); renamed[b], that NHWC
  // copy, read by the group's layers from then on.
  struct Pending {
    std::string values;  // the NCHW blob
    LayerParameter like;  // its writer: the conversion's types
    int origin;
  };
  std::map<std::string, Pending> pending;
  std::map<std::string, std::string> renamed, nchw_name;
  NetParameter out(*param);
  out.clear_layer();
  std::vector<int> from;
  const auto group_name = [&](const std::string& b) {  // what a group layer reads for b
    auto p = pending.find(b);
    if (p != pending.end()) {
      const std::string to = fresh(&all_names, b + "/nhwc");
      *out.add_layer() = convert(p->second.like, p->second.values, to);
      from.push_back(p->second.origin);
      plan.nhwc.insert(to);
      renamed[b] = to;
      pending.erase(p);
    }
    auto it = renamed.find(b);
    return it == renamed.end() ? b : it->second;
  };
  for (int i = 0; i < n; ++i) {
    LayerParameter lp = param->layer(i);
    const LayerParameter& original = param->layer(i);
    if (role[i] != kNchwOnly && role[i] != kNhwcSource) {
      for (std::string& b : *lp.mutable_bottom()) b = group_name(b);
      for (std::string& t : *lp.mutable_top()) t = group_name(t);
      for (const std::string& t : original.top())
        if (Contains(original.bottom(), t)) nchw_name.erase(t);  // written in place: the NCHW values are stale
      *out.add_layer() = lp;
      from.push_back(i);
      continue;
    }
    std::map<std::string, std::string> in_place;  // an in-place blob -> the NCHW copy the layer computes on
    for (std::string& b : *lp.mutable_bottom()) {
      if (!nhwc(b)) continue;
      const std::string name = b;
      auto known = nchw_name.find(name);
      if (known != nchw_name.end()) {
        b = known->second;
      } else {
        b = fresh(&all_names, name + "/nchw");
        *out.add_layer() = convert(lp, group_name(name), b);
        from.push_back(i);
      }
      if (Contains(original.top(), name)) in_place[name] = b;
    }
    for (std::string& t : *lp.mutable_top()) {
      if (!nhwc(t)) continue;
      if (role[i] == kNhwcSource && &t == &lp.top(0)) continue;  // written in the group's layout
      const std::string name = t;
      auto ip = in_place.find(name);
      if (ip != in_place.end()) {
        t = ip->second;  // in place on the NCHW copy; name keeps its earlier (NHWC) values
      } else {
        plan.nhwc.erase(name);  // the layer's own NCHW output
      }
      renamed.erase(name);  // an earlier NHWC copy is stale now
      nchw_name[name] = t;
      pending[name] = Pending{t, lp, i};
    }
    *out.add_layer() = lp;
    from.push_back(i);
  }
  *param = out;
  if (origin) *origin = from;
  return plan;
}

std::string LayoutPlanSummary(const LayoutPlan& plan) {
  return str_cat(plan.nhwc.size(), " blobs NHWC in ", plan.groups, plan.groups == 1 ? " group, " : " groups, ",
                 plan.conversions, plan.conversions == 1 ? " layout conversion" : " layout conversions");
}

}  // namespace cortado
