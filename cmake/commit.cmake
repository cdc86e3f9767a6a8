# Run at build time (cmake -DSRC=<checkout> -DOUT=<file.c> -P commit.cmake):
# writes the commit `gpuslice --version` prints, "unknown" outside git, and
# rewrites OUT only when it changes so that an unchanged tree relinks nothing.
execute_process(COMMAND git -C "${SRC}" describe --always --dirty --abbrev=12 --match=NONE
  OUTPUT_VARIABLE commit RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT rc EQUAL 0 OR commit STREQUAL "")
  set(commit unknown)
endif()
set(text "/* Written by cmake/commit.cmake at build time. */\nconst char gs_cli_commit[] = \"${commit}\";\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
