#pragma once
// Caffe's image list files (convert_imageset's LISTFILE, ImageData's
// source): one image a line, "relative/path.JPEG label", the label after the
// last space or tab (paths may hold spaces). Blank lines are skipped; a
// CRLF file reads as LF. Errors name the file and the line: a line without
// a label, a label that is not a non-negative 32-bit integer (Caffe's atoi
// would read "abc" as 0), a line with no path, a list with no images.

#include <cstdint>
#include <string>
#include <vector>

namespace cortado {

struct ImageListEntry {
  std::string path;  // as written in the list
  int label = 0;
  int64_t line = 0;  // 1-based line in the list file
};

std::vector<ImageListEntry> ReadImageList(const std::string& list_path);

}  // namespace cortado
