#pragma once
// The start of every command-line tool: its flags parsed (gflags) and
// glog set up, with Caffe's log prefix.
//
// Caffe's and NVCaffe's log parsers and plotters (parse_log.py,
// plot_training_log.py) read lines as glog wrote them then:
// "I1206 21:13:23.352751 15486 solver.cpp:435] ...". glog 0.6 writes the
// year too ("I20261206 ..."), which those tools do not read, so the tools
// turn it off by default; --log_year_in_prefix brings it back.

namespace cortado {

/// gflags::ParseCommandLineFlags(argc, argv, true), then
/// google::InitGoogleLogging((*argv)[0]), the year left out of the prefix
/// unless --log_year_in_prefix=true.
void InitTool(int* argc, char*** argv);

}  // namespace cortado
