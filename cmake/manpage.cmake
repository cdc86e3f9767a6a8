# Run at build time (cmake -DEXE=<gpuslice> -DCMD=<subcommand or empty>
# -DVERSION=<v> -DOUT=<file.1> -P manpage.cmake): a man page made from the
# program's own --help, so that the two cannot disagree. The help text is
# kept as written (.nf), with roff's special characters escaped.
if(CMD)
  set(args ${CMD} --help)
  set(title "gpuslice-${CMD}")
else()
  set(args --help)
  set(title "gpuslice")
endif()
execute_process(COMMAND ${EXE} ${args} OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR help STREQUAL "")
  message(FATAL_ERROR "${EXE} ${args} failed (${rc}): no man page")
endif()
string(TOUPPER "${title}" upper)
string(REPLACE "\\" "\\e" help "${help}")
string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" help "${help}")
# The NAME line: the command's line in `gpuslice --help`, or for gpuslice
# itself the sentence after its usage line.
execute_process(COMMAND ${EXE} --help OUTPUT_VARIABLE top)
if(CMD)
  string(REGEX MATCH "\n  ${CMD} +([^\n]+)" _ "${top}")
else()
  string(REGEX MATCH "\n\n([^\n]+)" _ "${top}")
endif()
string(REGEX REPLACE "[.:]$" "" summary "${CMAKE_MATCH_1}")
string(REGEX REPLACE " \\(see [^)]*\\)" "" summary "${summary}")
string(REPLACE "\\" "\\e" summary "${summary}")
file(WRITE "${OUT}" ".TH ${upper} 1 \"\" \"gpuslice ${VERSION}\" \"User Commands\"
.SH NAME
${title} \\- ${summary}
.SH DESCRIPTION
.nf
${help}.fi
.SH SEE ALSO
gpuslice(1), gpuslice-run(1), gpuslice-top(1), gpuslice-rm(1), gpuslice-sim(1), gpuslice-inspect(1);
the CLI reference, docs/cli.md, installed under share/doc/gpuslice.
")
