# txmq_embed_files(TARGET t NAME fn NAMESPACE ns HEADER h BASE_DIR dir FILES f1 f2 ...):
# compiles files into target t as bytes, so an installed binary needs nothing beside it (the
# web console, broker/console/). Generates ${CMAKE_CURRENT_BINARY_DIR}/<fn>.cc, which includes
# h and defines
#   std::span<const ns::embedded_file> ns::fn()
# (both declared in h; embedded_file is {path, content_type, bytes}, all std::string_view):
# each file's path below BASE_DIR with a leading '/', its Content-Type (from the extension) and
# its bytes. The .cc is regenerated when a listed file changes.
set(TXMQ_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/txmq_embed_script.cmake)

function(txmq_embed_files)
  cmake_parse_arguments(ARG "" "TARGET;NAME;NAMESPACE;HEADER;BASE_DIR" "FILES" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.cc)
  set(abs_files)
  foreach(f IN LISTS ARG_FILES)
    list(APPEND abs_files ${ARG_BASE_DIR}/${f})
  endforeach()
  # The list goes through a file: a ';'-separated list on a command line would be split.
  string(REPLACE ";" "\n" listing "${ARG_FILES}")
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.files "${listing}\n")
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DNAME=${ARG_NAME} -DNAMESPACE=${ARG_NAMESPACE} -DHEADER=${ARG_HEADER} -DBASE_DIR=${ARG_BASE_DIR}
            -DLISTING=${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.files -DOUT=${out}
            -P ${TXMQ_EMBED_SCRIPT}
    DEPENDS ${abs_files} ${TXMQ_EMBED_SCRIPT} ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.files
    COMMENT "Embedding ${ARG_NAME} (${ARG_BASE_DIR})"
    VERBATIM)
  target_sources(${ARG_TARGET} PRIVATE ${out})
endfunction()
