// The ocloc gate: compiles every OpenCL C program the xpu backend can build for one Intel GPU target with
// Intel's offline compiler, which needs no GPU. Usage: ocloc_gate <tgllp|dg2|pvc>. The programs, sources and
// options come from every_program (programs.h), the list the runtime builds from. On DPAS targets the DPAS
// programs are disassembled and must contain dpas instructions; no disassembly may contain an invalid
// instruction. Exits non-zero on any failure, printing ocloc's output; ocloc missing is a failure too.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "tfm/backend/xpu/device_capabilities.h"
#include "tfm/backend/xpu/programs.h"

namespace fs = std::filesystem;

namespace {

// Where Debian's libigc1 keeps IGA, which `ocloc disasm` opens as libiga64.so (Debian ships only .so.1).
constexpr const char* kIga = "/usr/lib/x86_64-linux-gnu/libiga64.so.1";

struct Target {
  std::string name;
  tfm::xpu::DeviceCapabilities device;  // what the runtime would read on such a device
};

std::optional<Target> target_named(const std::string& name) {
  tfm::xpu::DeviceCapabilities device;
  device.intel_subgroups = true;
  device.fp16 = true;
  device.bf16 = true;
  if (name == "tgllp") {  // Xe-LP: sub-groups, no DPAS (it compiles, but into an invalid instruction)
    device.sub_group_sizes = {8, 16, 32};
  } else if (name == "dg2") {  // Xe-HPG: DPAS at SIMD8
    device.sub_group_sizes = {8, 16, 32};
    device.dpas = true;
  } else if (name == "pvc") {  // Xe-HPC: DPAS at SIMD16, no SIMD8
    device.sub_group_sizes = {16, 32};
    device.dpas = true;
  } else {
    return std::nullopt;
  }
  return Target{name, device};
}

struct Run {
  int status;
  std::string output;
};

// Runs a shell command, stdout and stderr together.
Run run(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "cannot run: " + command};
  std::string output;
  std::array<char, 4096> buffer;
  for (size_t n; (n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of every .asm file `ocloc disasm` writes for `binary`, or an error message in `failure`.
std::string disassemble(const fs::path& binary, const std::string& device, const fs::path& work,
                        std::string& failure) {
  const fs::path libs = work / "iga", dump = work / (binary.filename().string() + "_asm");
  fs::create_directories(libs);
  if (!fs::exists(libs / "libiga64.so")) fs::create_symlink(kIga, libs / "libiga64.so");
  const Run r = run("LD_LIBRARY_PATH='" + libs.string() + "' ocloc disasm -file '" + binary.string() +
                    "' -device " + device + " -dump '" + dump.string() + "'");
  std::string text;
  if (fs::exists(dump)) {
    for (const auto& entry : fs::directory_iterator(dump))
      if (entry.path().extension() == ".asm") text += read_text(entry.path());
  }
  if (r.status != 0 || text.empty()) failure = "ocloc disasm wrote no assembly:\n" + r.output;
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Target> target = argc == 2 ? target_named(argv[1]) : std::nullopt;
  if (!target) {
    std::cerr << "usage: ocloc_gate <tgllp|dg2|pvc>\n";
    return 2;
  }
  if (run("command -v ocloc").status != 0) {
    std::cerr << "ocloc not found on PATH: install intel-opencl-icd (scripts/setup does), which ships "
                 "/usr/bin/ocloc\n";
    return 1;
  }
  if (target->device.dpas && !fs::exists(kIga)) {
    std::cerr << kIga << " not found: install libigc1 (intel-opencl-icd depends on it) to disassemble\n";
    return 1;
  }
  char pattern[] = "/tmp/tfm-ocloc-XXXXXX";
  if (!mkdtemp(pattern)) {
    std::cerr << "cannot create a temporary directory\n";
    return 1;
  }
  const fs::path work = pattern;

  int failures = 0, index = 0;
  const auto programs = tfm::xpu::every_program(target->device);
  for (const tfm::xpu::Program& p : programs) {
    const std::string stem = p.name + std::string("_") + std::to_string(index++);
    const fs::path source = work / (stem + ".cl"), out = work / stem;
    std::ofstream(source) << p.text();
    const std::string what = std::string(p.name) + " with '" + p.options + "' for " + target->name;
    const Run r = run("ocloc compile -q -file '" + source.string() + "' -device " + target->name +
                      " -out_dir '" + out.string() + "' -output_no_suffix -options '" + p.options + "'");
    const fs::path binary = out / stem;  // -output_no_suffix: no device name, no extension
    if (r.status != 0 || !fs::exists(binary)) {
      std::cerr << "FAILED to build " << what << ":\n" << r.output << "\n";
      ++failures;
      continue;
    }
    if (!target->device.dpas) continue;
    std::string failure;
    const std::string assembly = disassemble(binary, target->name, work, failure);
    const bool expects_dpas = std::string(p.name) == "intel_dpas";
    if (failure.empty() && assembly.find("INVALID") != std::string::npos) failure = "an invalid instruction";
    if (failure.empty() && expects_dpas && assembly.find("dpas") == std::string::npos)
      failure = "no dpas instruction";
    if (!failure.empty()) {
      std::cerr << "FAILED " << what << ": " << failure << "\n";
      ++failures;
    }
  }
  std::cout << target->name << ": " << programs.size() - failures << " of " << programs.size()
            << " programs passed (built" << (target->device.dpas ? ", disassembled" : "") << ")\n";
  fs::remove_all(work);
  return failures == 0 ? 0 : 1;
}
