# One concern of core/ or packager/ as its own library (docs/architecture.md).
#
#   kiln_concern(<name> USES <concern>... SOURCES <file>... [PRIVATE_HEADERS <file>...])
#
# Builds kiln_<name>, a static library, from the folder <name>/ beside the calling CMakeLists.txt.
# Its headers are included as "<name>/<file>.hpp", the folder above being the include root.
# USES names exactly the concerns whose headers its files include (the public API, kiln_api, is
# everyone's); PRIVATE_HEADERS are this concern's alone. cmake/check_layering.py fails the build
# on an include that crosses a boundary USES does not declare, on a private header included from
# outside, on a USES nothing includes, and on a cycle; it also holds docs/architecture.md's map
# to what is declared here.
#
#   kiln_layering_consumer(<name> DIRS <folder>... USES <concern>...)
#
# Declares a folder that is no concern (the facade, tests, benchmarks, fuzz targets) for the same
# check: its files include only the concerns named and nobody's private headers.

function(kiln_concern name)
  cmake_parse_arguments(arg "" "" "USES;SOURCES;PRIVATE_HEADERS" ${ARGN})
  set(dir ${CMAKE_CURRENT_SOURCE_DIR}/${name})
  list(TRANSFORM arg_SOURCES PREPEND ${dir}/ REGEX "^[^/$]")
  add_library(kiln_${name} STATIC ${arg_SOURCES})
  target_include_directories(kiln_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  set(deps ${arg_USES})
  list(TRANSFORM deps PREPEND kiln_)
  if(NOT name STREQUAL "api")
    list(APPEND deps kiln_api)
  endif()
  target_link_libraries(kiln_${name} PUBLIC ${deps} PRIVATE kiln_warnings kiln_sanitizers)
  target_compile_features(kiln_${name} PUBLIC cxx_std_17)
  # Compiled once, hidden and position-independent: the same objects go into libkiln.so, the
  # CLI, the tests and the fuzzers.
  set_target_properties(kiln_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  add_dependencies(kiln_${name} kiln_layering_check)
  set_property(GLOBAL APPEND PROPERTY KILN_LAYERING_CONCERNS ${name})
  set_property(GLOBAL PROPERTY KILN_LAYERING_${name}_DIRS ${dir})
  set_property(GLOBAL PROPERTY KILN_LAYERING_${name}_USES ${arg_USES})
  set_property(GLOBAL PROPERTY KILN_LAYERING_${name}_PRIVATE ${arg_PRIVATE_HEADERS})
endfunction()

function(kiln_layering_consumer name)
  cmake_parse_arguments(arg "" "" "DIRS;USES" ${ARGN})
  list(TRANSFORM arg_DIRS PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/ REGEX "^[^/]")
  set_property(GLOBAL APPEND PROPERTY KILN_LAYERING_CONSUMERS ${name})
  set_property(GLOBAL PROPERTY KILN_LAYERING_${name}_DIRS ${arg_DIRS})
  set_property(GLOBAL PROPERTY KILN_LAYERING_${name}_USES ${arg_USES})
endfunction()

# Writes what was declared to <build>/layering.json, once every folder has been read (called at
# the end of the top CMakeLists.txt); the check target reads it.
function(kiln_write_layering)
  get_property(concerns GLOBAL PROPERTY KILN_LAYERING_CONCERNS)
  get_property(consumers GLOBAL PROPERTY KILN_LAYERING_CONSUMERS)
  set(json "{\n  \"concerns\": {")
  set(sep "")
  foreach(kind concerns consumers)
    if(kind STREQUAL "consumers")
      string(APPEND json "\n  },\n  \"consumers\": {")
      set(sep "")
    endif()
    foreach(name IN LISTS ${kind})
      get_property(dirs GLOBAL PROPERTY KILN_LAYERING_${name}_DIRS)
      get_property(uses GLOBAL PROPERTY KILN_LAYERING_${name}_USES)
      get_property(private GLOBAL PROPERTY KILN_LAYERING_${name}_PRIVATE)
      foreach(list dirs uses private)
        if(${list})
          string(JOIN "\", \"" ${list}_json ${${list}})
          set(${list}_json "[\"${${list}_json}\"]")
        else()
          set(${list}_json "[]")
        endif()
      endforeach()
      string(APPEND json "${sep}\n    \"${name}\": {\"dirs\": ${dirs_json}, \"uses\": ${uses_json}, "
        "\"private\": ${private_json}}")
      set(sep ",")
    endforeach()
  endforeach()
  string(APPEND json "\n  }\n}\n")
  file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/layering.json CONTENT "${json}")
endfunction()
