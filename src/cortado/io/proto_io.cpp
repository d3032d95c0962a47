#include "cortado/io/proto_io.hpp"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "cortado.pb.h"
#include "cortado/io/upgrade_proto.hpp"

namespace cortado {

namespace pb = google::protobuf;
using Tree = pb::TextFormat::ParseInfoTree;

namespace {

// Collects parse errors (0-based line and column, as the tokenizer gives them).
class Collector : public pb::io::ErrorCollector {
 public:
  explicit Collector(std::string name) : name_(std::move(name)) {}
  void AddError(int line, int column, const std::string& message) override {
    errors.push_back({line, column, message});
  }
  void AddWarning(int line, int column, const std::string& message) override {
    LOG(WARNING) << name_ << ":" << line + 1 << ":" << column + 1 << ": " << message;
  }
  struct Item {
    int line, column;
    std::string message;
  };
  std::vector<Item> errors;

 private:
  std::string name_;
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream is(text);
  std::string l;
  while (std::getline(is, l)) lines.push_back(l);
  return lines;
}

// The text of `line` without its comment (a '#' outside quotes).
std::string strip_comment(const std::string& line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return line.substr(0, i);
    }
  }
  return line;
}

// Protobuf reports an unknown enum value at the token after it (often the
// next line). Moves such an error back to the line and column of the value.
void fix_enum_position(const std::vector<std::string>& lines, Collector::Item* e) {
  static const std::string kPrefix = "Unknown enumeration value of \"";
  if (e->message.compare(0, kPrefix.size(), kPrefix) != 0) return;
  const size_t q = e->message.find('"', kPrefix.size());
  if (q == std::string::npos) return;
  const std::string value = e->message.substr(kPrefix.size(), q - kPrefix.size());
  for (int l = std::min<int>(e->line, static_cast<int>(lines.size()) - 1); l >= 0 && l >= e->line - 50; --l) {
    const std::string text = strip_comment(lines[l]);
    const size_t end_col = l == e->line ? static_cast<size_t>(std::max(e->column, 0)) : text.size();
    size_t pos = text.rfind(value, end_col);
    while (pos != std::string::npos) {
      const auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
      const bool starts = pos == 0 || !ident(text[pos - 1]);
      const bool ends = pos + value.size() >= text.size() || !ident(text[pos + value.size()]);
      if (starts && ends && pos + value.size() <= end_col) {
        e->line = l;
        e->column = static_cast<int>(pos);
        return;
      }
      if (pos == 0) break;
      pos = text.rfind(value, pos - 1);
    }
  }
}

// Where a parse error lies: the enclosing `layer { ... }` block's name and
// the dotted path of the field (relative to that layer, or to the file's
// message outside any layer), found by scanning the text (the parse failed,
// so there is no tree to ask).
struct Place {
  std::string layer;
  std::string field;
};

// A block that holds one layer: `layer`, V1's `layers`, V0's `layer` inside it.
bool layer_block(const std::string& name) { return name == "layer" || name == "layers"; }

Place locate(const std::vector<std::string>& lines, int err_line, int err_col) {
  struct Block {
    std::string name;
    std::string layer_name;  // for "layer" blocks
  };
  std::vector<Block> stack;
  std::vector<Block> at_error;  // the stack when the error position was reached
  bool reached = false;
  std::string key_at_error;     // last key on the error line before the column
  std::string last_ident;       // the previous token, if an identifier in key position
  bool after_colon = false;     // the previous token was ':'
  bool expect_name = false;     // inside a layer block, after "name:"
  size_t layer_depth_at_error = std::string::npos;
  bool done = false;            // the error's layer block was scanned to its end
  Place place;
  // The scan reaches the error: keep the blocks open there and the innermost layer among them.
  auto reach = [&] {
    reached = true;
    at_error = stack;
    for (size_t k = at_error.size(); k-- > 0;)
      if (layer_block(at_error[k].name)) {
        layer_depth_at_error = k;
        break;
      }
  };
  for (int l = 0; l < static_cast<int>(lines.size()); ++l) {
    const std::string& text = lines[l];
    size_t i = 0;
    while (i < text.size()) {
      const char c = text[i];
      const int col = static_cast<int>(i);
      if (!reached && (l > err_line || (l == err_line && col >= err_col))) reach();
      if (done) break;
      if (c == '#') break;
      if (std::isspace(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      if (c == '"' || c == '\'') {
        size_t j = i + 1;
        while (j < text.size() && text[j] != c) j += text[j] == '\\' ? 2 : 1;
        if (expect_name && !stack.empty() && layer_block(stack.back().name) && stack.back().layer_name.empty())
          stack.back().layer_name = text.substr(i + 1, std::min(j, text.size()) - i - 1);
        expect_name = false;
        after_colon = false;
        last_ident.clear();
        i = j + 1;
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = i;
        while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_')) ++j;
        const std::string ident = text.substr(i, j - i);
        if (after_colon) {
          last_ident.clear();  // a value (an enum name, true/false)
        } else {
          last_ident = ident;
          if (!reached && l == err_line) key_at_error = ident;
        }
        after_colon = false;
        i = j;
        continue;
      }
      if (c == ':') {
        expect_name = last_ident == "name";
        after_colon = true;
      } else if (c == '{' || c == '<') {
        stack.push_back({last_ident, ""});
        last_ident.clear();
        after_colon = false;
        expect_name = false;
      } else if (c == '}' || c == '>') {
        if (reached && layer_depth_at_error != std::string::npos && stack.size() == layer_depth_at_error + 1) {
          // The layer around the error closes: its name is known by now.
          if (layer_block(stack.back().name)) at_error[layer_depth_at_error].layer_name = stack.back().layer_name;
          done = true;
        }
        if (!stack.empty()) stack.pop_back();
        last_ident.clear();
        after_colon = false;
        expect_name = false;
      } else {
        // A number or other value: not a key.
        size_t j = i + 1;
        while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j])) &&
               std::string("{}<>:#\"'").find(text[j]) == std::string::npos)
          ++j;
        last_ident.clear();
        after_colon = false;
        expect_name = false;
        i = j;
        continue;
      }
      ++i;
    }
    if (!reached && l == err_line) reach();
    if (done || (reached && layer_depth_at_error == std::string::npos)) break;
  }
  if (!reached) at_error = stack;
  size_t first = 0;
  for (size_t k = at_error.size(); k-- > 0;)
    if (layer_block(at_error[k].name)) {
      place.layer = at_error[k].layer_name;
      if (place.layer.empty()) place.layer = "?";
      first = k + 1;
      break;
    }
  for (size_t k = first; k < at_error.size(); ++k) {
    if (at_error[k].name.empty()) continue;
    place.field += (place.field.empty() ? "" : ".") + at_error[k].name;
  }
  if (!key_at_error.empty()) place.field += (place.field.empty() ? "" : ".") + key_at_error;
  return place;
}

// protobuf's "Message type ... has no field named "python_param"." for a
// parameter of a layer type Cortado does not have: say that instead.
void unavailable_layer_note(std::string* message) {
  static const std::string kNoField = "has no field named \"";
  const size_t at = message->find(kNoField);
  if (at == std::string::npos) return;
  const size_t from = at + kNoField.size(), to = message->find('"', from);
  if (to == std::string::npos) return;
  const std::string field = message->substr(from, to - from);
  if (const char* type = UnavailableLayerType(field))
    *message = str_cat("layer type '", type, "' (", field, ") is not available in Cortado");
}

}  // namespace

void ParseTextProto(const std::string& text, const std::string& name, pb::Message* msg, SourceInfo* info) {
  Collector collector(name);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  auto tree = std::make_shared<Tree>();
  parser.WriteLocationsTo(tree.get());
  if (!parser.ParseFromString(text, msg)) {
    if (collector.errors.empty()) fail(name, ": cannot parse as a text ", msg->GetTypeName());
    const std::vector<std::string> lines = split_lines(text);
    std::string msg_text;
    for (size_t k = 0; k < collector.errors.size(); ++k) {
      Collector::Item e = collector.errors[k];
      fix_enum_position(lines, &e);
      if (k == 0) unavailable_layer_note(&e.message);
      msg_text += str_cat(k ? "\n" : "", name, ":", e.line + 1, ":", e.column + 1, ": ", e.message);
      if (k == 0) {
        const Place place = locate(lines, e.line, e.column);
        if (!place.layer.empty() && !place.field.empty())
          msg_text += " (in layer '" + place.layer + "', field " + place.field + ")";
        else if (!place.layer.empty())
          msg_text += " (in layer '" + place.layer + "')";
        else if (!place.field.empty())
          msg_text += " (field " + place.field + ")";
      }
    }
    throw Error(msg_text);
  }
  SourceInfo parsed(name, tree, tree.get());
  UpgradeOnRead(name, msg, &parsed, /*text=*/true);
  if (info) *info = parsed;
}

void ReadTextProto(const std::string& path, pb::Message* msg, SourceInfo* info) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(path, ": is a directory, not a ", msg->GetDescriptor()->name(), " prototxt file");
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the file for reading");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, ": read error");
  ParseTextProto(ss.str(), path, msg, info);
}

void ReadBinaryProto(const std::string& path, pb::Message* msg) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(path, ": is a directory, not a binary ", msg->GetDescriptor()->name(), " file");
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path, ": cannot open the file for reading");
  pb::io::FileInputStream raw(fd);
  pb::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  const bool ok = msg->ParseFromCodedStream(&coded);
  close(fd);
  if (!ok) fail(path, ": not a valid binary ", msg->GetTypeName(), " (corrupt or truncated)");
  UpgradeOnRead(path, msg, nullptr, /*text=*/false);
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
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    int index = 0;  // "bottom[1]": the second value of a repeated field
    const size_t bracket = part.find('[');
    if (bracket != std::string::npos && part.back() == ']') {
      index = std::atoi(part.c_str() + bracket + 1);
      part.resize(bracket);
    }
    const pb::FieldDescriptor* f = desc->FindFieldByName(part);
    if (!f) break;
    const int at = f->is_repeated() ? index : -1;
    pb::TextFormat::ParseLocation loc = tree->GetLocation(f, at);
    if (loc.line < 0 && at > 0) loc = tree->GetLocation(f, 0);  // fewer values than the index
    if (loc.line < 0) break;
    line = loc.line + 1;
    if (dot == std::string::npos || f->type() != pb::FieldDescriptor::TYPE_MESSAGE) break;
    tree = tree->GetTreeForNested(f, at);
    if (!tree) break;
    desc = f->message_type();
    start = dot + 1;
  }
  return line;
}
}  // namespace

void SourceInfo::set_layer_origins(const Tree* net_tree, std::vector<LayerOrigin> origins) {
  if (!origins_) origins_ = std::make_shared<Origins>();
  (*origins_)[net_tree] = std::move(origins);
}

int SourceInfo::field_line(int layer, const std::string& field) const {
  if (!net_tree_ || layer < 0) return 0;
  LayerOrigin origin{LayerOrigin::kLayer, layer};
  if (origins_) {
    const auto it = origins_->find(net_tree_);
    if (it != origins_->end() && layer < static_cast<int>(it->second.size())) origin = it->second[layer];
  }
  if (origin.kind == LayerOrigin::kNetInput) return net_field_line("input");
  const bool v1 = origin.kind == LayerOrigin::kV1Layer;
  const pb::FieldDescriptor* lf = NetParameter::descriptor()->FindFieldByName(v1 ? "layers" : "layer");
  const pb::TextFormat::ParseLocation loc = net_tree_->GetLocation(lf, origin.index);
  if (loc.line < 0) return 0;
  const Tree* lt = net_tree_->GetTreeForNested(lf, origin.index);
  return walk(lt, v1 ? V1LayerParameter::descriptor() : LayerParameter::descriptor(), field, loc.line + 1);
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

std::string RankFileName(const std::string& path, int rank) {
  if (rank <= 0) return path;
  const size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  // A dot that starts the file name (".h5", "dir/.x") is not an extension.
  const bool ext = dot != std::string::npos && dot > (slash == std::string::npos ? 0 : slash + 1);
  const size_t at = ext ? dot : path.size();
  return path.substr(0, at) + "_rank" + std::to_string(rank) + path.substr(at);
}

}  // namespace cortado
