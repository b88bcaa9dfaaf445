// Runs a fuzz target over files, as a libFuzzer binary does with file arguments, where libFuzzer is not
// linked (the g++ builds): ctest re-runs every input of tests/fuzz/regressions/ with each compiler and
// sanitizer.
#include <cstdint>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::cerr << "cannot read " << argv[i] << "\n";
      return 1;
    }
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::cout << argv[i] << std::endl;  // flushed: after a crash, the last name printed is the input at fault
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::cout << argc - 1 << " inputs ran\n";
  return 0;
}
