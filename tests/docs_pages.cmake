# ctest docs.EveryPageRunsAsWritten: every ```sh block of the user docs, run as a user would run
# it against what a release ships (scripts/doc_commands.sh, one bash per page, from an empty
# directory): this build installed into a fresh prefix (KILN_PREFIX; its bin/ first on PATH) and
# kiln's runtime wheel (KILN_WHEELS, <build>/python-dist, which python.RuntimeWheel builds the
# same way). Blocks fenced sh-untested are skipped with the reason they give; a page whose shell
# block is neither, or says no reason, fails. docs/packages.md builds examples/acme-kernels with
# the real nvcc and CMake, from nothing to a mirror and an installed wheel.
set(work "${WORK}")
file(REMOVE_RECURSE "${work}")
file(MAKE_DIRECTORY "${work}")
string(TIMESTAMP started "%s")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${work}/kiln"
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} failed (${rc})")
endif()
# The runtime wheel: KILN_TEST_RUNTIME_WHEEL's directory when set (as scripts/python_tests.sh
# takes it), else built (incrementally) where python.RuntimeWheel builds it.
if(DEFINED ENV{KILN_TEST_RUNTIME_WHEEL})
  get_filename_component(wheels "$ENV{KILN_TEST_RUNTIME_WHEEL}" DIRECTORY)
else()
  set(wheels "${BUILD_DIR}/python-dist")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env KILN_WHEEL_BUILD_DIR=${BUILD_DIR}/python-wheel
            bash ${SRC_DIR}/scripts/build_runtime_wheel.sh ${wheels}
    RESULT_VARIABLE rc OUTPUT_QUIET)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "scripts/build_runtime_wheel.sh ${wheels} failed (${rc})")
  endif()
endif()
execute_process(COMMAND bash ${SRC_DIR}/scripts/find_python312.sh
  RESULT_VARIABLE rc OUTPUT_VARIABLE python OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "no CPython >= 3.12 (scripts/find_python312.sh)")
endif()
file(GLOB pages "${SRC_DIR}/docs/*.md")
list(PREPEND pages "${SRC_DIR}/README.md")
set(failed "")
foreach(page IN LISTS pages)
  get_filename_component(name "${page}" NAME_WE)
  set(scratch "${work}/${name}")
  file(MAKE_DIRECTORY "${scratch}/scratch")
  # Only what a user has: the installed kiln first on PATH, the release's runtime wheel, no
  # package index (pip looks nowhere else), and a cache of its own.
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env KILN_PREFIX=${work}/kiln KILN_SRC=${SRC_DIR}
            KILN_WHEELS=${wheels} PYTHON=${python}
            WORK=${scratch}/scratch XDG_CACHE_HOME=${scratch}/cache
            PATH=${work}/kiln/bin:$ENV{PATH} PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
            --unset=KILN_ARTIFACT_PATH --unset=KILN_MIRRORS --unset=KILN_INDEX_SHA256
            --unset=PIP_FIND_LINKS --unset=PIP_INDEX_URL --unset=PIP_EXTRA_INDEX_URL
            bash ${SRC_DIR}/scripts/doc_commands.sh ${page}
    WORKING_DIRECTORY "${scratch}/scratch"
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(APPEND failed "${page} (exit ${rc})")
  endif()
endforeach()
string(TIMESTAMP finished "%s")
math(EXPR took "${finished} - ${started}")
message(STATUS "docs: every page run in ${took} s")
if(failed)
  message(FATAL_ERROR "a command of these pages failed (see the output above): ${failed}")
endif()
