# What `cmake --install` puts under the prefix (README.md, "Install"): the client-side static
# libraries with their public headers, a CMake package (find_package(txmq CONFIG)) and one
# pkg-config file per library. The binaries install from their own folders.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(TXMQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/txmq)
set(TXMQ_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The .pc files find their prefix from where they lie, so one build installs to any --prefix.
file(RELATIVE_PATH TXMQ_PC_TO_PREFIX /prefix/${TXMQ_PKGCONFIG_DIR} /prefix)

# txmq_install_library(TARGET NAME HEADERS_DIR DESCRIPTION REQUIRES [LIBS flags...])
# Installs TARGET as txmq::NAME (libTARGET.a), its headers (HEADERS_DIR/txmq/...) and
# txmq-NAME.pc. The libraries are static: REQUIRES names every pkg-config package they need,
# private ones included, and LIBS the linker flags of what has no .pc (Boost, threads).
function(txmq_install_library target name)
  cmake_parse_arguments(ARG "" "HEADERS_DIR;DESCRIPTION" "REQUIRES;LIBS" ${ARGN})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  # The public headers are C++20: users compile them with at least that.
  target_compile_features(${target} PUBLIC cxx_std_20)
  install(TARGETS ${target} EXPORT txmq-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(DIRECTORY ${ARG_HEADERS_DIR}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h")
  set(TXMQ_PC_NAME txmq-${name})
  set(TXMQ_PC_DESCRIPTION "${ARG_DESCRIPTION}")
  list(JOIN ARG_REQUIRES " " TXMQ_PC_REQUIRES)
  list(JOIN ARG_LIBS " " TXMQ_PC_LIBS)
  set(TXMQ_PC_LIB ${target})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/txmq.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/txmq-${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/txmq-${name}.pc DESTINATION ${TXMQ_PKGCONFIG_DIR})
endfunction()

# Called once every library is defined: the exported targets and the package config.
function(txmq_install_package)
  install(EXPORT txmq-targets NAMESPACE txmq:: DESTINATION ${TXMQ_CMAKE_DIR})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/txmq-config.cmake.in
    ${PROJECT_BINARY_DIR}/txmq-config.cmake
    INSTALL_DESTINATION ${TXMQ_CMAKE_DIR})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/txmq-config-version.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/txmq-config.cmake ${PROJECT_BINARY_DIR}/txmq-config-version.cmake
    DESTINATION ${TXMQ_CMAKE_DIR})
endfunction()
