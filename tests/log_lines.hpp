#pragma once
// Collects the lines of the glog log, with their severity, while it lives
// (they reach stderr too); INFO lines are let through for its lifetime.
#include <glog/logging.h>

#include <ctime>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace cortado {
namespace test {

class LogLines : public google::LogSink {
 public:
  LogLines() : level_(FLAGS_minloglevel) {
    FLAGS_minloglevel = 0;
    google::AddLogSink(this);
  }
  ~LogLines() override {
    google::RemoveLogSink(this);
    FLAGS_minloglevel = level_;
  }
  LogLines(const LogLines&) = delete;
  LogLines& operator=(const LogLines&) = delete;

  void send(google::LogSeverity severity, const char*, const char*, int, const std::tm*, const char* message,
            size_t length) override {
    std::lock_guard<std::mutex> lock(mutex_);
    lines_.emplace_back(severity, std::string(message, length));
  }
  /// The messages so far.
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& l : lines_) out.push_back(l.second);
    return out;
  }
  /// The (severity, message) of the lines that hold `text`.
  std::vector<std::pair<google::LogSeverity, std::string>> with(const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<google::LogSeverity, std::string>> out;
    for (const auto& l : lines_)
      if (l.second.find(text) != std::string::npos) out.push_back(l);
    return out;
  }

 private:
  int level_;
  std::mutex mutex_;
  std::vector<std::pair<google::LogSeverity, std::string>> lines_;
};

}  // namespace test
}  // namespace cortado
