# ctest docs.ShipYourKernelsWithKilnRunsAsWritten: installs this build of kiln into a fresh
# prefix, then runs every sh block of docs/packages.md against it (scripts/doc_commands.sh):
# the example project from an empty build to archives, an installed store, compat, a mirror, a
# fetch and wheels, with the real nvcc and CMake.
set(work "${WORK}")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}/scratch")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${work}/kiln"
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc})")
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env KILN_PREFIX=${work}/kiln KILN_SRC=${SRC_DIR}
          WORK=${work}/scratch XDG_CACHE_HOME=${work}/cache
          bash ${SRC_DIR}/scripts/doc_commands.sh ${SRC_DIR}/docs/packages.md
  WORKING_DIRECTORY "${work}/scratch"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "docs/packages.md: a command failed (exit ${rc}); see the output above")
endif()
