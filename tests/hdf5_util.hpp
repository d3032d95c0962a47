#pragma once
// HDF5 fixtures for the tests of the HDF5 layers, written and read with the
// HDF5 C API itself (not Cortado's wrapper, which they test). Only in
// builds with HDF5.
#include "cortado/config.hpp"

#ifdef CORTADO_USE_HDF5
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace cortado {
namespace test {

/// A dataset to write: its name, dimensions, values, and the file type
/// (H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I32LE, ...).
struct H5Dataset {
  std::string name;
  std::vector<hsize_t> dims;
  std::vector<double> values;
  hid_t file_type;
};

inline void WriteH5(const std::string& path, const std::vector<H5Dataset>& datasets) {
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  ASSERT_GE(f, 0) << path;
  for (const H5Dataset& d : datasets) {
    const hid_t space = H5Screate_simple(static_cast<int>(d.dims.size()), d.dims.data(), nullptr);
    const hid_t ds = H5Dcreate2(f, d.name.c_str(), d.file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(ds, 0) << d.name;
    ASSERT_GE(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, d.values.data()), 0) << d.name;
    H5Dclose(ds);
    H5Sclose(space);
  }
  H5Fclose(f);
}

/// Dataset `name` of `path` as float; its dimensions in *dims. Empty, with a
/// test failure, when it cannot be read.
inline std::vector<float> ReadH5(const std::string& path, const std::string& name, std::vector<hsize_t>* dims) {
  std::vector<float> out;
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) {
    ADD_FAILURE() << "cannot open " << path;
    return out;
  }
  const hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
  if (ds < 0) {
    ADD_FAILURE() << path << " has no dataset " << name;
    H5Fclose(f);
    return out;
  }
  const hid_t space = H5Dget_space(ds);
  dims->assign(static_cast<size_t>(H5Sget_simple_extent_ndims(space)), 0);
  H5Sget_simple_extent_dims(space, dims->data(), nullptr);
  size_t n = 1;
  for (hsize_t d : *dims) n *= d;
  out.resize(n);
  if (n > 0) EXPECT_GE(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  H5Sclose(space);
  H5Dclose(ds);
  H5Fclose(f);
  return out;
}

}  // namespace test
}  // namespace cortado
#endif
