#include "cortado/data/image_list.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <system_error>

#include "cortado/common.hpp"

namespace cortado {

namespace {

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

int parse_label(std::string_view text, const std::string& where) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) fail(where, "label '", text, "' is out of range");
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(where, "label '", text, "' is not an integer (expected 'path label', the label after the last space)");
  }
  if (v < 0) fail(where, "label ", v, " is negative; labels are class indices 0, 1, 2, ...");
  if (v > std::numeric_limits<int32_t>::max()) fail(where, "label ", v, " does not fit in 32 bits");
  return static_cast<int>(v);
}

}  // namespace

std::vector<ImageListEntry> ReadImageList(const std::string& list_path) {
  std::error_code ec;
  if (std::filesystem::is_directory(list_path, ec)) fail(list_path, ": is a directory, expected the list file");
  std::ifstream in(list_path);
  if (!in) fail(list_path, ": cannot open the list file: ", std::strerror(errno));
  std::vector<ImageListEntry> entries;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    const std::string_view text = trim_right(line);  // also drops a CRLF file's '\r'
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = str_cat(list_path, ":", n, ": ");
    const size_t space = text.find_last_of(" \t");
    if (space == std::string_view::npos) {
      fail(where, "no label in '", text, "' (expected 'path label', the label after the last space)");
    }
    ImageListEntry e;
    e.label = parse_label(text.substr(space + 1), where);
    e.path = std::string(trim_right(text.substr(0, space)));
    if (e.path.find_first_not_of(" \t") == std::string::npos) fail(where, "no image path before the label");
    e.line = n;
    entries.push_back(std::move(e));
  }
  if (in.bad()) fail(list_path, ": read error");
  if (entries.empty()) fail(list_path, ": the list holds no images");
  return entries;
}

}  // namespace cortado
