# ctest libkiln.ExportsOnlyTheDocumentedApi: the dynamic symbols libkiln.so defines are exactly
# the lines of exported_symbols.txt (demangled, as `nm -DC --defined-only` prints them). A symbol
# not in the list is an internal that became ABI (or one an application could interpose); a
# listed symbol that is gone is an API break. Each one is named.
#   cmake -DLIB=build/libkiln.so -DALLOW=tests/exported_symbols.txt -P tests/exported_symbols.cmake
find_program(NM NAMES nm REQUIRED)
execute_process(COMMAND ${NM} -D -C --defined-only "${LIB}" OUTPUT_VARIABLE out
  ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -DC --defined-only ${LIB} failed (${rc}): ${err}")
endif()
string(REPLACE ";" "\\;" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
set(exported)
foreach(line IN LISTS lines)
  # "0000000000012345 T name(args)": the name is everything after the type letter.
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] (.+)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
file(STRINGS "${ALLOW}" allow_lines)
set(allowed)
foreach(line IN LISTS allow_lines)
  if(NOT line MATCHES "^#" AND NOT line STREQUAL "")
    list(APPEND allowed "${line}")
  endif()
endforeach()
set(unexpected ${exported})
list(REMOVE_ITEM unexpected ${allowed})
set(missing ${allowed})
list(REMOVE_ITEM missing ${exported})
list(LENGTH exported n)
set(report "")
foreach(s IN LISTS unexpected)
  string(APPEND report "\n  exported but not in the documented API: ${s}")
endforeach()
foreach(s IN LISTS missing)
  string(APPEND report "\n  documented API symbol not exported: ${s}")
endforeach()
if(report)
  message(FATAL_ERROR "${LIB} exports ${n} dynamic symbols; they differ from ${ALLOW}:${report}\n"
    "Mark API with KILN_API (kiln/export.h); update the list only for a documented API change.")
endif()
message(STATUS "${LIB}: ${n} exported symbols, all in ${ALLOW}")
