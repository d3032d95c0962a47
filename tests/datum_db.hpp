#pragma once
// Writes a small LMDB of raw Datum records for tests that train through a
// Data layer: keys %08d in record order, one byte per pixel.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "cortado.pb.h"
#include "cortado/data/lmdb.hpp"

namespace cortado {
namespace test {

/// n records of (channels, height, width); pixel(i, k) is byte k of record
/// i, label(i) its label. Where corrupt(i), record i holds bytes that are
/// not a Datum (a reader must fail on it with the record's key).
inline void WriteRawDatumDb(const std::string& path, int n, int channels, int height, int width,
                            const std::function<uint8_t(int, int)>& pixel, const std::function<int(int)>& label,
                            const std::function<bool(int)>& corrupt = nullptr) {
  LmdbWriter w(path);
  for (int i = 0; i < n; ++i) {
    if (corrupt && corrupt(i)) {
      char key[16];
      std::snprintf(key, sizeof(key), "%08d", i);
      w.Put(key, std::string(12, '\xff'));  // a varint that never ends
      continue;
    }
    Datum d;
    d.set_channels(channels);
    d.set_height(height);
    d.set_width(width);
    std::string pixels;
    for (int k = 0; k < channels * height * width; ++k) pixels.push_back(static_cast<char>(pixel(i, k)));
    d.set_data(pixels);
    d.set_label(label(i));
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    w.Put(key, d.SerializeAsString());
  }
  w.Close();
}

}  // namespace test
}  // namespace cortado
