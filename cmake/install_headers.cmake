# Part of the install step (see CMakeLists.txt, which sets TFM_CXX, TFM_SOURCE, TFM_HEADER_ROOTS and
# TFM_INCLUDE_DESTINATION): installs the headers the roots include, directly or not, as the compiler lists them.
list(TRANSFORM TFM_HEADER_ROOTS PREPEND ${TFM_SOURCE}/)
execute_process(COMMAND ${TFM_CXX} -std=c++20 -I${TFM_SOURCE} -MM ${TFM_HEADER_ROOTS}
                OUTPUT_VARIABLE dependencies RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cannot list the headers of ${TFM_HEADER_ROOTS}")
endif()
string(REGEX MATCHALL "${TFM_SOURCE}/tfm/[^ \\\n]+\\.h" headers "${dependencies}")
list(REMOVE_DUPLICATES headers)
foreach(header ${headers})
  file(RELATIVE_PATH relative ${TFM_SOURCE} ${header})
  get_filename_component(folder ${relative} DIRECTORY)
  file(INSTALL ${header} DESTINATION ${CMAKE_INSTALL_PREFIX}/${TFM_INCLUDE_DESTINATION}/${folder})
endforeach()
