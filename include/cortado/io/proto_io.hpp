#pragma once
// Reading and writing protobuf files, with enough source information to name
// the line of any field in user errors.
//
// - ReadTextProto parses a prototxt. A syntax error, an unknown field or an
//   unknown enum value throws Error "file:line:col: message (in layer 'x',
//   field convolution_param.num_output)" (the line of an unknown enum value
//   is the value's own, not that of the token after it).
// - A SourceInfo remembers the file and the parse tree, so that
//   field_line(layer_index, "convolution_param.num_output") gives the 1-based
//   line of that field (or of the layer when the field is absent).
// - WriteBinaryProto writes to "<path>.tmp" and renames, so an interrupted
//   write never leaves a truncated file under the final name.

#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cortado/common.hpp"

namespace cortado {

/// Where a layer of an upgraded net (io/upgrade_proto.hpp) was written: a
/// `layer` entry, a V1 (or V0) `layers` entry, or the net-level input fields
/// (the Input layer made of them).
struct LayerOrigin {
  enum Kind { kLayer, kV1Layer, kNetInput };
  Kind kind = kLayer;
  int index = 0;
};

class SourceInfo {
 public:
  SourceInfo() = default;
  SourceInfo(std::string file, std::shared_ptr<google::protobuf::TextFormat::ParseInfoTree> root,
             const google::protobuf::TextFormat::ParseInfoTree* net_tree)
      : file_(std::move(file)), root_(std::move(root)), net_tree_(net_tree) {}

  const std::string& file() const { return file_; }
  bool has_tree() const { return net_tree_ != nullptr; }
  /// 1-based line of `field` (dotted path inside LayerParameter) of the layer
  /// at index `layer` in the NetParameter as written; falls back to the
  /// deepest part of the path that exists, then to the layer; 0 if unknown.
  /// A part may name one value of a repeated field: "bottom[1]",
  /// "input_param.shape[2]" (index 0 when absent).
  int field_line(int layer, const std::string& field) const;
  /// 1-based line of a NetParameter field path (relative to the net).
  int net_field_line(const std::string& field) const;
  /// 1-based line of a field path of the file's top-level message `d`.
  int root_field_line(const google::protobuf::Descriptor* d, const std::string& field) const;
  /// The same file, with `net_tree` as the tree of the net inside it.
  SourceInfo with_net_tree(const google::protobuf::TextFormat::ParseInfoTree* net_tree) const {
    SourceInfo s(file_, root_, net_tree);
    s.origins_ = origins_;
    return s;
  }
  /// After an upgrade: layer i of the net whose parse tree is `net_tree` was
  /// written at origins[i], so that field_line finds its line.
  void set_layer_origins(const google::protobuf::TextFormat::ParseInfoTree* net_tree,
                         std::vector<LayerOrigin> origins);
  const google::protobuf::TextFormat::ParseInfoTree* root_tree() const { return root_.get(); }
  /// "file:line: " or "file: " (or "" without a file).
  std::string where(int line) const;

 private:
  std::string file_;
  std::shared_ptr<google::protobuf::TextFormat::ParseInfoTree> root_;
  const google::protobuf::TextFormat::ParseInfoTree* net_tree_ = nullptr;
  using Origins = std::map<const google::protobuf::TextFormat::ParseInfoTree*, std::vector<LayerOrigin>>;
  std::shared_ptr<Origins> origins_;  // shared by the copies for the nets inside one file
};

/// Parses a prototxt file into `msg`; throws Error naming the file and line
/// (a field of a layer type Cortado does not have, such as python_param,
/// says that layer type is not available). A NetParameter or
/// SolverParameter in an older Caffe format is upgraded (io/upgrade_proto.hpp).
/// With `info`, returns the parse tree of the whole file (the net's tree is the root).
void ReadTextProto(const std::string& path, google::protobuf::Message* msg, SourceInfo* info = nullptr);
/// Parses prototxt text (used by tests); `name` stands in for the file name.
void ParseTextProto(const std::string& text, const std::string& name, google::protobuf::Message* msg,
                    SourceInfo* info = nullptr);
/// Reads a binary protobuf file; a NetParameter (.caffemodel) in an older
/// Caffe format is upgraded.
void ReadBinaryProto(const std::string& path, google::protobuf::Message* msg);
/// Writes "<path>.tmp", flushes, renames to path.
void WriteBinaryProto(const std::string& path, const google::protobuf::Message& msg);
void WriteTextProto(const std::string& path, const google::protobuf::Message& msg);
bool FileExists(const std::string& path);
/// Resolves `path` relative to the directory of `relative_to` if it is not
/// absolute and does not exist as given (Caffe resolves from the working
/// directory; Cortado tries that first).
std::string ResolvePath(const std::string& path, const std::string& relative_to);
/// The file a rank of a data-parallel run writes instead of `path`: rank 0
/// keeps it, rank r > 0 gets "_rank<r>" before the extension of the file
/// name ("out/feat.h5" -> "out/feat_rank1.h5").
std::string RankFileName(const std::string& path, int rank);

}  // namespace cortado
