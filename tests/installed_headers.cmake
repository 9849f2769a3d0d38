# ctest install.InstallsOnlyThePublicHeadersEachCompilingAlone: `cmake --install` of this build
# puts exactly the user-facing headers under include/kiln (no core/ or loader/src header, no
# test seam), and each compiles on its own against the install tree alone: C++17 for every
# header, C11 as well for the C ABI headers (.h), warnings as errors.
#   cmake -DBUILD_DIR=build -DWORK=/tmp/x -DHEADERS="loader.hpp;kiln.h;..." -DCXX=c++ -DCC=cc
#         -P tests/installed_headers.cmake
file(REMOVE_RECURSE "${WORK}")
set(prefix "${WORK}/prefix")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc}):\n${out}${err}")
endif()
# Everything under include/, whatever its kind (a stray symlink counts too).
execute_process(COMMAND find . -mindepth 1 -not -type d WORKING_DIRECTORY "${prefix}/include"
  OUTPUT_VARIABLE found RESULT_VARIABLE rc)
string(REPLACE "./" "" found "${found}")
string(STRIP "${found}" found)
string(REPLACE "\n" ";" installed "${found}")
list(SORT installed)
set(expected ${HEADERS})
list(TRANSFORM expected PREPEND "kiln/")
list(SORT expected)
if(NOT installed STREQUAL expected)
  set(extra ${installed})
  list(REMOVE_ITEM extra ${expected})
  set(absent ${expected})
  list(REMOVE_ITEM absent ${installed})
  message(FATAL_ERROR "include/ of the install tree differs from the public headers:\n"
    "  installed but not public: ${extra}\n  public but not installed: ${absent}")
endif()
set(failures "")
foreach(h IN LISTS HEADERS)
  set(langs "c++")
  if(h MATCHES "\\.h$")
    list(APPEND langs "c")
  endif()
  foreach(lang IN LISTS langs)
    set(ext cpp)
    set(compiler ${CXX})
    set(std -std=c++17)
    if(lang STREQUAL "c")
      set(ext c)
      set(compiler ${CC})
      set(std -std=c11)
    endif()
    string(MAKE_C_IDENTIFIER "${h}" id)
    set(tu "${WORK}/${id}.${ext}")
    # Included twice (include guards), then one declaration: C forbids an empty unit.
    file(WRITE "${tu}" "#include <kiln/${h}>\n#include <kiln/${h}>\ntypedef int kiln_check;\n")
    execute_process(COMMAND ${compiler} ${std} -fsyntax-only -Wall -Wextra -Wpedantic -Werror
      -I "${prefix}/include" "${tu}" OUTPUT_VARIABLE cout ERROR_VARIABLE cerr RESULT_VARIABLE crc)
    if(NOT crc EQUAL 0)
      string(APPEND failures "\n  kiln/${h} as ${lang} (${std}):\n${cout}${cerr}")
    endif()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "installed headers that do not compile alone:${failures}")
endif()
list(LENGTH HEADERS n)
message(STATUS "${n} public headers installed, each compiles alone")
