#include "tfm/backend/xpu/program_cache.h"

#include <vector>

#include "tfm/core/error.h"

namespace tfm::xpu {

ProgramCache::ProgramCache(cl_context context, cl_device_id device, std::string where)
    : context_(context), device_(device), where_(std::move(where)) {}

cl_program ProgramCache::get(std::string_view name, const std::string& source, const std::string& options) {
  std::lock_guard lock(mutex_);
  auto key = std::pair(source, options);
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();

  const std::string where = where_ + ": program '" + std::string(name) + "'";
  const char* text = source.c_str();
  const size_t length = source.size();
  cl_int status = CL_SUCCESS;
  ClProgram program(clCreateProgramWithSource(context_, 1, &text, &length, &status));
  cl_check(status, "clCreateProgramWithSource", where);

  status = clBuildProgram(program.get(), 1, &device_, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    // The log is best effort: failing to read it must not hide the build failure itself.
    size_t size = 0;
    std::string log;
    if (clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size) ==
            CL_SUCCESS &&
        size > 1) {
      std::vector<char> bytes(size);
      if (clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, size, bytes.data(), nullptr) ==
          CL_SUCCESS) {
        log.assign(bytes.data(), size - 1);
      }
    }
    throw_error(where, ": clBuildProgram with options '", options, "' failed with ", cl_status_name(status),
                " (", status, ")", log.empty() ? "" : "; build log:\n", log);
  }
  return programs_.emplace(std::move(key), std::move(program)).first->second.get();
}

}  // namespace tfm::xpu
