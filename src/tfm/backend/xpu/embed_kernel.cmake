# Writes an OpenCL C file into a C++ source as a string constant: cmake -DIN=<file.cl> -DOUT=<file.cpp>
# -DNAME=<identifier> -P embed_kernel.cmake. The constant is tfm::xpu::kernel_sources::<NAME> (kernel_sources.h).
file(READ ${IN} text)
file(WRITE ${OUT}
  "// Generated from ${IN} by embed_kernel.cmake; edit the .cl file.\n"
  "#include \"tfm/backend/xpu/kernel_sources.h\"\n"
  "namespace tfm::xpu::kernel_sources {\n"
  "const char* const ${NAME} = R\"tfm_cl(${text})tfm_cl\";\n"
  "}  // namespace tfm::xpu::kernel_sources\n")
