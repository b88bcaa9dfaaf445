// OpenCL C programs built for one device and kept: each (source, options) pair is compiled once per device.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "tfm/backend/xpu/opencl.h"

namespace tfm::xpu {

class ProgramCache {
 public:
  // `where` names the device in errors ("xpu:0").
  ProgramCache(cl_context context, cl_device_id device, std::string where);

  // The program built from `source` with the clBuildProgram `options`, built on first request; `name` only
  // labels errors. A failed build throws tfm::Error carrying the build log and is not cached.
  cl_program get(std::string_view name, const std::string& source, const std::string& options);

 private:
  cl_context context_;
  cl_device_id device_;
  std::string where_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, ClProgram> programs_;
};

}  // namespace tfm::xpu
