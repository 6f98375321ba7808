# CPACK_PRE_BUILD_SCRIPTS: drops the debug sections of the static libraries in the package
# (CPACK_STRIP_FILES strips the executables only); their symbols stay, so they still link.
file(GLOB_RECURSE archives "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*.a")
foreach(archive IN LISTS archives)
  execute_process(COMMAND strip --strip-debug "${archive}" COMMAND_ERROR_IS_FATAL ANY)
endforeach()
