# The facts libkiln needs to dlopen a library it does not link (core/runtime/lazy_libs.cpp):
# the SONAME of the library CMake found, read from its dynamic section, and the Debian package
# that provides it, so the error for a missing library names what to install. Nothing guessed.

# kiln_library_soname(<out-var> <library file>): DT_SONAME of <library file>; fatal without one.
function(kiln_library_soname out lib)
  execute_process(COMMAND "${CMAKE_READELF}" -d "${lib}" OUTPUT_VARIABLE dyn
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT dyn MATCHES "\\(SONAME\\)[^\n]*\\[([^]\n]+)\\]")
    message(FATAL_ERROR "cannot read the SONAME of ${lib} with '${CMAKE_READELF} -d' "
      "(exit ${rc}: ${err}); libkiln dlopens it by that name")
  endif()
  set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# kiln_library_package(<out-var> <library file> <soname>): the Debian package that owns the
# file <soname> beside <library file> ("" when dpkg-query is absent or does not know it).
function(kiln_library_package out lib soname)
  set(pkg "")
  find_program(KILN_DPKG_QUERY dpkg-query)
  get_filename_component(dir "${lib}" DIRECTORY)
  if(KILN_DPKG_QUERY)
    foreach(candidate "${dir}/${soname}" "${lib}")
      file(REAL_PATH "${candidate}" real)
      foreach(path "${candidate}" "${real}")
        execute_process(COMMAND "${KILN_DPKG_QUERY}" -S "${path}" OUTPUT_VARIABLE owner
          RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
        if(rc EQUAL 0 AND owner MATCHES "^([^:,]+)")
          set(pkg "${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
      if(pkg)
        break()
      endif()
    endforeach()
  endif()
  set(${out} "${pkg}" PARENT_SCOPE)
endfunction()

# kiln_lazy_library(<prefix> <regex> <candidate files...>): sets <prefix>_SONAME and
# <prefix>_PACKAGE from the first candidate whose file name matches <regex>.
function(kiln_lazy_library prefix regex)
  set(found "")
  foreach(lib ${ARGN})
    get_filename_component(name "${lib}" NAME)
    if(IS_ABSOLUTE "${lib}" AND name MATCHES "${regex}")
      set(found "${lib}")
      break()
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "no shared library matching ${regex} among '${ARGN}'")
  endif()
  kiln_library_soname(soname "${found}")
  kiln_library_package(package "${found}" "${soname}")
  message(STATUS "libkiln loads ${soname} on first use (from ${found}; package '${package}')")
  set(${prefix}_SONAME "${soname}" PARENT_SCOPE)
  set(${prefix}_PACKAGE "${package}" PARENT_SCOPE)
endfunction()
