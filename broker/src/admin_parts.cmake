# The broker's configuration, metrics registry and admin HTTP server: txmq::broker_admin.
# Included from broker/CMakeLists.txt. TXMQ_BROKER_DIR is the broker/ folder; it defaults to
# the parent of this file's folder, so the file also works when included from elsewhere.
if(NOT DEFINED TXMQ_BROKER_DIR)
  get_filename_component(TXMQ_BROKER_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

# Debian: libtomlplusplus-dev (compiled library, CMake config package).
if(NOT TARGET tomlplusplus::tomlplusplus)
  find_package(tomlplusplus CONFIG REQUIRED)
endif()

add_library(txmq_broker_admin STATIC
  ${TXMQ_BROKER_DIR}/src/config.cc
  ${TXMQ_BROKER_DIR}/src/metrics.cc
  ${TXMQ_BROKER_DIR}/src/admin_http.cc
)
add_library(txmq::broker_admin ALIAS txmq_broker_admin)
target_include_directories(txmq_broker_admin
  PUBLIC ${TXMQ_BROKER_DIR}/include
  PRIVATE ${TXMQ_BROKER_DIR}/src)
# Asio and Beast appear in the public headers (io_context, endpoints, awaitable); the option
# and TOML parsers do not.
target_link_libraries(txmq_broker_admin
  PUBLIC txmq::protocol Boost::headers Threads::Threads
  PRIVATE Boost::program_options tomlplusplus::tomlplusplus txmq::warnings)
target_compile_definitions(txmq_broker_admin PRIVATE TXMQ_VERSION="${PROJECT_VERSION}")
