# Writes version.cpp from VERSION (passed in) and the current git commit; rewrites the
# file only when its content changes, so only that one file recompiles.
execute_process(COMMAND git -C "${SRC_DIR}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE KILN_GIT_COMMIT RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rc EQUAL 0)
  set(KILN_GIT_COMMIT "")
else()
  execute_process(COMMAND git -C "${SRC_DIR}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE dirty ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(dirty)
    set(KILN_GIT_COMMIT "${KILN_GIT_COMMIT}-dirty")
  endif()
endif()
configure_file("${TEMPLATE}" "${OUT}.tmp" @ONLY)
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
