# kiln_add_kernel_package(<target> PROJECT_DIR <dir> SYMBOL <c identifier>
#                         [SHARED | STATIC | OBJECT] [KILN_EXECUTABLE <path>]
#                         [NO_INSTALL_DESCRIPTION])
#
# Generates, from a kernel project (<dir>/VERSION, registry/package.json, registry/kernels.json,
# kernels/; docs/packages.md), the C description of its package (kiln/package.h) and builds it
# into the library <target> (STATIC by default), which defines
#
#     const kiln_package* <SYMBOL>(void);
#
# to hand to kiln::Loader or kiln_loader_create. The description is regenerated when any file it
# was made from changes (a depfile lists the registry, VERSION and every hashed kernel source).
# <target> needs only kiln/package.h (kiln::kiln's include directories), not libkiln itself:
# link kiln::kiln where the loader is used. A SHARED package library finds the store installed beside it
# (<prefix>/share/kiln/artifacts) without variables. Works in kiln's own tree and through
# find_package(kiln), which runs the installed `kiln package-source`.
#
# The same description is written as <name>-<version>.package.json (project/
# package_description.hpp) and installed with the package's stores, into
# <prefix>/share/kiln/artifacts (unless NO_INSTALL_DESCRIPTION): `kiln resolve`, `kiln compat`
# and the loaders of other languages read it on a node that has the install but not the project.
# Its path is the target's KILN_PACKAGE_DESCRIPTION property.
function(kiln_add_kernel_package target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "SHARED;STATIC;OBJECT;NO_INSTALL_DESCRIPTION" "PROJECT_DIR;SYMBOL;KILN_EXECUTABLE" "")
  if(NOT ARG_PROJECT_DIR OR NOT ARG_SYMBOL)
    message(FATAL_ERROR "kiln_add_kernel_package(${target}): PROJECT_DIR and SYMBOL are required")
  endif()
  get_filename_component(project_dir "${ARG_PROJECT_DIR}" ABSOLUTE)
  foreach(f VERSION registry/package.json registry/kernels.json)
    if(NOT EXISTS "${project_dir}/${f}")
      message(FATAL_ERROR "kiln_add_kernel_package(${target}): no ${f} in ${project_dir} "
        "(a kernel project holds VERSION, registry/package.json, registry/kernels.json, kernels/)")
    endif()
  endforeach()
  set(type STATIC)
  if(ARG_SHARED)
    set(type SHARED)
  elseif(ARG_OBJECT)
    set(type OBJECT)
  endif()
  if(ARG_KILN_EXECUTABLE)
    set(kiln_exe "${ARG_KILN_EXECUTABLE}")
  elseif(TARGET kiln::cli)
    set(kiln_exe "$<TARGET_FILE:kiln::cli>")
  elseif(TARGET kiln_cli)
    set(kiln_exe "$<TARGET_FILE:kiln_cli>")
  else()
    message(FATAL_ERROR "kiln_add_kernel_package(${target}): no kiln executable (find_package(kiln) "
      "gives kiln::cli; or pass KILN_EXECUTABLE)")
  endif()
  # The description file is named for the package's name and version, read here (CMake runs
  # again when either changes); kiln package-source checks both again when it writes it.
  file(READ "${project_dir}/VERSION" version)
  string(STRIP "${version}" version)
  file(READ "${project_dir}/registry/package.json" package_json)
  string(JSON package_name ERROR_VARIABLE json_error GET "${package_json}" name)
  if(json_error)
    message(FATAL_ERROR "kiln_add_kernel_package(${target}): ${project_dir}/registry/package.json: "
      "no name (${json_error})")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${project_dir}/VERSION"
    "${project_dir}/registry/package.json")
  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/kiln_packages/${target}")
  set(out "${out_dir}/${ARG_SYMBOL}.c")
  set(description "${out_dir}/${package_name}-${version}.package.json")
  add_custom_command(
    OUTPUT "${out}" "${description}"
    COMMAND "${kiln_exe}" package-source --source "${project_dir}" --symbol "${ARG_SYMBOL}"
            --output "${out}" --description "${description}" --depfile "${out}.d"
    DEPENDS "${project_dir}/VERSION" "${project_dir}/registry/package.json"
            "${project_dir}/registry/kernels.json"
    DEPFILE "${out}.d"
    COMMENT "Describing the kernel package in ${project_dir}"
    VERBATIM)
  add_library(${target} ${type} "${out}" "${description}")
  set_source_files_properties("${description}" PROPERTIES HEADER_FILE_ONLY ON)
  set_target_properties(${target} PROPERTIES KILN_PACKAGE_DESCRIPTION "${description}")
  if(NOT ARG_NO_INSTALL_DESCRIPTION)
    include(GNUInstallDirs)
    install(FILES "${description}" DESTINATION "${CMAKE_INSTALL_DATADIR}/kiln/artifacts")
  endif()
  set_source_files_properties("${out}" PROPERTIES LANGUAGE C)
  target_include_directories(${target} PRIVATE
    $<TARGET_PROPERTY:kiln::kiln,INTERFACE_INCLUDE_DIRECTORIES>)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
