#pragma once
// TensorBoard event files read back for tests: the records through
// ReadRecord (util/event_writer.hpp), each Event parsed by protobuf itself
// from descriptors of TensorFlow's Event, Summary and HistogramProto built
// here (event.proto's and summary.proto's field names and numbers, the
// fields Cortado writes), so that the hand encoding is checked by an
// independent parser.
#include <gtest/gtest.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cortado/common.hpp"
#include "cortado/util/event_writer.hpp"

namespace cortado {
namespace test {

class EventSchema {
 public:
  EventSchema() {
    namespace pb = google::protobuf;
    pb::FileDescriptorProto file;
    const char* text = R"pb(
      name: "tensorboard_event_test.proto" package: "tbtest" syntax: "proto3"
      message_type {
        name: "HistogramProto"
        field { name: "min" number: 1 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "max" number: 2 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "num" number: 3 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "sum" number: 4 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "sum_squares" number: 5 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "bucket_limit" number: 6 type: TYPE_DOUBLE label: LABEL_REPEATED options { packed: true } }
        field { name: "bucket" number: 7 type: TYPE_DOUBLE label: LABEL_REPEATED options { packed: true } }
      }
      message_type {
        name: "Value"
        field { name: "tag" number: 1 type: TYPE_STRING label: LABEL_OPTIONAL }
        field { name: "simple_value" number: 2 type: TYPE_FLOAT label: LABEL_OPTIONAL }
        field { name: "histo" number: 5 type: TYPE_MESSAGE type_name: ".tbtest.HistogramProto" label: LABEL_OPTIONAL }
      }
      message_type {
        name: "Summary"
        field { name: "value" number: 1 type: TYPE_MESSAGE type_name: ".tbtest.Value" label: LABEL_REPEATED }
      }
      message_type {
        name: "Event"
        field { name: "wall_time" number: 1 type: TYPE_DOUBLE label: LABEL_OPTIONAL }
        field { name: "step" number: 2 type: TYPE_INT64 label: LABEL_OPTIONAL }
        field { name: "file_version" number: 3 type: TYPE_STRING label: LABEL_OPTIONAL }
        field { name: "summary" number: 5 type: TYPE_MESSAGE type_name: ".tbtest.Summary" label: LABEL_OPTIONAL }
      })pb";
    CORTADO_CHECK(pb::TextFormat::ParseFromString(text, &file));
    CORTADO_CHECK(pool_.BuildFile(file) != nullptr);
    event_ = pool_.FindMessageTypeByName("tbtest.Event");
  }
  /// The Event in `bytes`, parsed by protobuf.
  std::unique_ptr<google::protobuf::Message> Parse(const std::string& bytes) {
    std::unique_ptr<google::protobuf::Message> m(factory_.GetPrototype(event_)->New());
    EXPECT_TRUE(m->ParseFromString(bytes));
    return m;
  }

 private:
  google::protobuf::DescriptorPool pool_;
  google::protobuf::DynamicMessageFactory factory_{&pool_};
  const google::protobuf::Descriptor* event_ = nullptr;
};

/// One event's fields, as read back (one summary value per event, as
/// EventWriter writes them).
struct ReadEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::string tag;               // empty for the file_version record
  bool has_simple_value = false;
  float simple_value = 0;
  bool has_histo = false;
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Every event of the records in `bytes`, parsed through `schema`.
inline std::vector<ReadEvent> ParseEvents(const std::string& bytes, EventSchema* schema) {
  namespace pb = google::protobuf;
  std::vector<ReadEvent> out;
  size_t at = 0;
  std::string rec;
  while (ReadRecord(bytes, &at, &rec)) {
    auto m = schema->Parse(rec);
    const pb::Descriptor* d = m->GetDescriptor();
    const pb::Reflection* r = m->GetReflection();
    ReadEvent e;
    e.wall_time = r->GetDouble(*m, d->FindFieldByName("wall_time"));
    e.step = r->GetInt64(*m, d->FindFieldByName("step"));
    e.file_version = r->GetString(*m, d->FindFieldByName("file_version"));
    if (r->HasField(*m, d->FindFieldByName("summary"))) {
      const pb::Message& s = r->GetMessage(*m, d->FindFieldByName("summary"));
      const pb::FieldDescriptor* values = s.GetDescriptor()->FindFieldByName("value");
      EXPECT_EQ(s.GetReflection()->FieldSize(s, values), 1);
      const pb::Message& v = s.GetReflection()->GetRepeatedMessage(s, values, 0);
      const pb::Descriptor* vd = v.GetDescriptor();
      const pb::Reflection* vr = v.GetReflection();
      e.tag = vr->GetString(v, vd->FindFieldByName("tag"));
      e.has_simple_value = vr->HasField(v, vd->FindFieldByName("simple_value"));
      e.simple_value = vr->GetFloat(v, vd->FindFieldByName("simple_value"));
      e.has_histo = vr->HasField(v, vd->FindFieldByName("histo"));
      if (e.has_histo) {
        const pb::Message& h = vr->GetMessage(v, vd->FindFieldByName("histo"));
        const pb::Descriptor* hd = h.GetDescriptor();
        const pb::Reflection* hr = h.GetReflection();
        e.min = hr->GetDouble(h, hd->FindFieldByName("min"));
        e.max = hr->GetDouble(h, hd->FindFieldByName("max"));
        e.num = hr->GetDouble(h, hd->FindFieldByName("num"));
        e.sum = hr->GetDouble(h, hd->FindFieldByName("sum"));
        e.sum_squares = hr->GetDouble(h, hd->FindFieldByName("sum_squares"));
        for (const char* name : {"bucket_limit", "bucket"}) {
          const pb::FieldDescriptor* f = hd->FindFieldByName(name);
          std::vector<double>& dst = std::string(name) == "bucket_limit" ? e.bucket_limit : e.bucket;
          for (int i = 0; i < hr->FieldSize(h, f); ++i) dst.push_back(hr->GetRepeatedDouble(h, f, i));
        }
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace test
}  // namespace cortado
