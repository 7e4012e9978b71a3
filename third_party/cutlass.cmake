# Finds the CUTLASS / CuTe headers and sets SWORDFISH_CUTLASS_INCLUDE.
#
# Order: the cache variable / environment variable SWORDFISH_CUTLASS_INCLUDE,
# then the nvidia-cutlass wheel installed in the build's Python environment
# (located with importlib.util.find_spec, so the package is not imported).
# Missing headers are a configure error naming the pip command that fixes it.

set(SWORDFISH_CUTLASS_INCLUDE "$ENV{SWORDFISH_CUTLASS_INCLUDE}" CACHE PATH
    "Directory holding cutlass/cutlass.h and cute/tensor.hpp (default: the nvidia-cutlass wheel)")

if(NOT SWORDFISH_CUTLASS_INCLUDE)
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import importlib.util, os; s = importlib.util.find_spec('cutlass_library'); print(os.path.join(s.submodule_search_locations[0], 'source', 'include') if s else '')"
    OUTPUT_VARIABLE _sf_cutlass_inc
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _sf_cutlass_rc)
  if(_sf_cutlass_rc EQUAL 0 AND _sf_cutlass_inc)
    set(SWORDFISH_CUTLASS_INCLUDE "${_sf_cutlass_inc}" CACHE PATH "" FORCE)
  endif()
endif()

if(NOT SWORDFISH_CUTLASS_INCLUDE OR NOT EXISTS "${SWORDFISH_CUTLASS_INCLUDE}/cutlass/cutlass.h"
   OR NOT EXISTS "${SWORDFISH_CUTLASS_INCLUDE}/cute/tensor.hpp")
  message(FATAL_ERROR
    "CUTLASS headers not found (looked for cutlass/cutlass.h and cute/tensor.hpp in "
    "'${SWORDFISH_CUTLASS_INCLUDE}'). Install them with\n"
    "    ${Python_EXECUTABLE} -m pip install nvidia-cutlass==4.2.0.0\n"
    "or pass -C cmake.define.SWORDFISH_CUTLASS_INCLUDE=/path/to/cutlass/include.")
endif()
message(STATUS "Swordfish: CUTLASS headers from ${SWORDFISH_CUTLASS_INCLUDE}")
