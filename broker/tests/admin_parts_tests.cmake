# Unit tests of txmq::broker_admin (config, metrics, admin HTTP). Included from
# broker/CMakeLists.txt (or broker/tests/CMakeLists.txt) after admin_parts.cmake.
set(TXMQ_BROKER_ADMIN_TESTS_DIR ${CMAKE_CURRENT_LIST_DIR})

txmq_add_test(broker_config_test unit
  SOURCES ${TXMQ_BROKER_ADMIN_TESTS_DIR}/config_test.cc
  LIBS txmq::broker_admin)
txmq_add_test(broker_metrics_test unit
  SOURCES ${TXMQ_BROKER_ADMIN_TESTS_DIR}/metrics_test.cc
  LIBS txmq::broker_admin Threads::Threads)
txmq_add_test(broker_admin_http_test unit
  SOURCES ${TXMQ_BROKER_ADMIN_TESTS_DIR}/admin_http_test.cc
  LIBS txmq::broker_admin Threads::Threads)
# config_test checks docs/configuration.md against the code (every setting listed, example valid).
get_filename_component(TXMQ_BROKER_ADMIN_DOCS_DIR "${TXMQ_BROKER_ADMIN_TESTS_DIR}/../../docs" ABSOLUTE)
target_compile_definitions(broker_config_test PRIVATE
  TXMQ_CONFIGURATION_DOC="${TXMQ_BROKER_ADMIN_DOCS_DIR}/configuration.md")
