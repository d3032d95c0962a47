// What a rank of a data-parallel run and a benchmark's batch size change in a
// layer, from the layer's traits (the table is in layer_registry.cpp). The fields are reached by
// name through protobuf reflection, so that a new data source is one line in
// the registry.
#include "cortado/layer_traits.hpp"

#include <algorithm>
#include <initializer_list>

#include "cortado.pb.h"
#include "cortado/common.hpp"
#include "cortado/io/proto_io.hpp"

namespace cortado {

namespace {
namespace pb = google::protobuf;

// The message field `name` of `layer`, made present; `fields` must exist in it.
pb::Message* MutableParam(LayerParameter* layer, const char* name, std::initializer_list<const char*> fields) {
  const pb::FieldDescriptor* f = LayerParameter::descriptor()->FindFieldByName(name);
  CORTADO_CHECK(f && f->type() == pb::FieldDescriptor::TYPE_MESSAGE) << name;
  pb::Message* m = layer->GetReflection()->MutableMessage(layer, f);
  for (const char* field : fields) CORTADO_CHECK(m->GetDescriptor()->FindFieldByName(field)) << name << "." << field;
  return m;
}
}  // namespace

bool ShardForRank(LayerParameter* layer, int rank, int ranks) {
  if (ranks <= 1) return false;
  const LayerTraits& t = layer_traits(layer->type());
  bool changed = false;
  if (t.shard_param) {
    pb::Message* m = MutableParam(layer, t.shard_param, {"shard_id", "num_shards"});
    const pb::Reflection* r = m->GetReflection();
    const pb::FieldDescriptor* id = m->GetDescriptor()->FindFieldByName("shard_id");
    const pb::FieldDescriptor* num = m->GetDescriptor()->FindFieldByName("num_shards");
    const uint32_t s = r->GetUInt32(*m, id), n = std::max(r->GetUInt32(*m, num), 1u);
    r->SetUInt32(m, id, s + static_cast<uint32_t>(rank) * n);
    r->SetUInt32(m, num, n * static_cast<uint32_t>(ranks));
    changed = true;
  }
  if (t.rank_file_param) {
    pb::Message* m = MutableParam(layer, t.rank_file_param, {"file_name"});
    const pb::FieldDescriptor* file = m->GetDescriptor()->FindFieldByName("file_name");
    m->GetReflection()->SetString(m, file, RankFileName(m->GetReflection()->GetString(*m, file), rank));
    changed = true;
  }
  return changed;
}

bool SetLayerBatch(LayerParameter* layer, int batch) {
  const LayerTraits& t = layer_traits(layer->type());
  if (!t.batch_param) return false;
  pb::Message* m = MutableParam(layer, t.batch_param, {});
  const pb::Descriptor* d = m->GetDescriptor();
  const pb::Reflection* r = m->GetReflection();
  if (const pb::FieldDescriptor* f = d->FindFieldByName("batch_size")) r->SetUInt32(m, f, static_cast<uint32_t>(batch));
  if (const pb::FieldDescriptor* f = d->FindFieldByName("shape")) {
    for (int i = 0; i < r->FieldSize(*m, f); ++i) {
      auto* shape = static_cast<BlobShape*>(r->MutableRepeatedMessage(m, f, i));
      if (shape->dim_size() > 0) shape->set_dim(0, batch);
    }
  }
  if (const pb::FieldDescriptor* f = d->FindFieldByName("num"))  // DummyData's legacy 4D form
    for (int i = 0; i < r->FieldSize(*m, f); ++i) r->SetRepeatedUInt32(m, f, i, static_cast<uint32_t>(batch));
  return true;
}

}  // namespace cortado
