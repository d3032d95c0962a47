#include "cortado/util/io.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

#include "cortado.pb.h"

namespace cortado {

namespace pb = google::protobuf;
using Tree = pb::TextFormat::ParseInfoTree;

namespace {

// Collects parse errors as "file:line:col: message".
class Collector : public pb::io::ErrorCollector {
 public:
  explicit Collector(std::string name) : name_(std::move(name)) {}
  void AddError(int line, int column, const std::string& message) override {
    if (first_line < 0) first_line = line + 1;
    errors += str_cat(errors.empty() ? "" : "\n", name_, ":", line + 1, ":", column + 1, ": ", message);
  }
  void AddWarning(int line, int column, const std::string& message) override {
    LOG(WARNING) << name_ << ":" << line + 1 << ":" << column + 1 << ": " << message;
  }
  std::string errors;
  int first_line = -1;

 private:
  std::string name_;
};

// The name of the `layer { ... }` block enclosing 1-based `line`, found by
// scanning the text (the parse failed, so there is no tree to ask).
std::string enclosing_layer(const std::string& text, int line) {
  std::istringstream is(text);
  std::string l, name;
  int depth = 0, n = 0, layer_depth = -1;
  while (std::getline(is, l) && ++n <= line) {
    const size_t hash = l.find('#');
    if (hash != std::string::npos) l.resize(hash);
    const size_t lp = l.find("layer");
    if (depth == 0 && lp != std::string::npos && l.find('{') != std::string::npos) {
      layer_depth = 1;
      name.clear();
    }
    if (layer_depth == 1 && depth <= 1) {
      const size_t np = l.find("name:");
      if (np != std::string::npos) {
        const size_t q1 = l.find_first_of("\"'", np);
        const size_t q2 = q1 == std::string::npos ? q1 : l.find(l[q1], q1 + 1);
        if (q2 != std::string::npos) name = l.substr(q1 + 1, q2 - q1 - 1);
      }
    }
    for (char c : l) depth += (c == '{') - (c == '}');
    if (depth == 0 && n < line) layer_depth = -1;
  }
  return layer_depth == 1 ? name : std::string();
}

}  // namespace

void ParseTextProto(const std::string& text, const std::string& name, pb::Message* msg, SourceInfo* info) {
  Collector collector(name);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  auto tree = std::make_shared<Tree>();
  parser.WriteLocationsTo(tree.get());
  if (!parser.ParseFromString(text, msg)) {
    std::string msg_text = collector.errors.empty() ? name + ": cannot parse" : collector.errors;
    const std::string layer = enclosing_layer(text, collector.first_line);
    if (!layer.empty()) msg_text += " (in layer '" + layer + "')";
    throw Error(msg_text);
  }
  if (info) *info = SourceInfo(name, tree, tree.get());
}

void ReadTextProto(const std::string& path, pb::Message* msg, SourceInfo* info) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  ParseTextProto(ss.str(), path, msg, info);
}

void ReadBinaryProto(const std::string& path, pb::Message* msg) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path, ": cannot open the file for reading");
  pb::io::FileInputStream raw(fd);
  pb::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  const bool ok = msg->ParseFromCodedStream(&coded);
  close(fd);
  if (!ok) fail(path, ": not a valid binary ", msg->GetTypeName(), " (corrupt or truncated)");
}

void WriteBinaryProto(const std::string& path, const pb::Message& msg) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(tmp, ": cannot open the file for writing");
    if (!msg.SerializeToOstream(&out)) fail(tmp, ": write failed");
    out.flush();
    if (!out) fail(tmp, ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename ", tmp, " to it");
}

void WriteTextProto(const std::string& path, const pb::Message& msg) {
  std::string text;
  pb::TextFormat::PrintToString(msg, &text);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) fail(tmp, ": cannot open the file for writing");
    out << text;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename ", tmp, " to it");
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string ResolvePath(const std::string& path, const std::string& relative_to) {
  if (path.empty() || path[0] == '/' || FileExists(path)) return path;
  const size_t slash = relative_to.rfind('/');
  if (slash == std::string::npos) return path;
  const std::string candidate = relative_to.substr(0, slash + 1) + path;
  return FileExists(candidate) ? candidate : path;
}

namespace {
// Walks a dotted path from `tree` over `desc`; returns the deepest line found.
int walk(const Tree* tree, const pb::Descriptor* desc, const std::string& path, int fallback) {
  int line = fallback;
  size_t start = 0;
  while (tree && desc && start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const pb::FieldDescriptor* f = desc->FindFieldByName(part);
    if (!f) break;
    const pb::TextFormat::ParseLocation loc = tree->GetLocation(f, f->is_repeated() ? 0 : -1);
    if (loc.line < 0) break;
    line = loc.line + 1;
    if (dot == std::string::npos || f->type() != pb::FieldDescriptor::TYPE_MESSAGE) break;
    tree = tree->GetTreeForNested(f, f->is_repeated() ? 0 : -1);
    desc = f->message_type();
    start = dot + 1;
  }
  return line;
}
}  // namespace

int SourceInfo::field_line(int layer, const std::string& field) const {
  if (!net_tree_ || layer < 0) return 0;
  const pb::FieldDescriptor* lf = NetParameter::descriptor()->FindFieldByName("layer");
  const pb::TextFormat::ParseLocation loc = net_tree_->GetLocation(lf, layer);
  if (loc.line < 0) return 0;
  const Tree* lt = net_tree_->GetTreeForNested(lf, layer);
  return walk(lt, LayerParameter::descriptor(), field, loc.line + 1);
}

int SourceInfo::net_field_line(const std::string& field) const {
  if (!net_tree_) return 0;
  return walk(net_tree_, NetParameter::descriptor(), field, 0);
}

int SourceInfo::root_field_line(const pb::Descriptor* d, const std::string& field) const {
  return root_ ? walk(root_.get(), d, field, 0) : 0;
}

std::string SourceInfo::where(int line) const {
  if (file_.empty()) return "";
  return line > 0 ? str_cat(file_, ":", line, ": ") : file_ + ": ";
}

}  // namespace cortado
