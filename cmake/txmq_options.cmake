# Compile options every txmq target gets: warnings on, optional -Werror and sanitizers.
add_library(txmq_warnings INTERFACE)
add_library(txmq::warnings ALIAS txmq_warnings)
# Option structs are meant to be filled with C++20 designated initializers, naming only what
# differs from the defaults; GCC's -Wmissing-field-initializers would flag every such use.
target_compile_options(txmq_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(TXMQ_WERROR)
  target_compile_options(txmq_warnings INTERFACE -Werror)
endif()
if(TXMQ_SANITIZE)
  target_compile_options(txmq_warnings INTERFACE -fsanitize=${TXMQ_SANITIZE} -fno-omit-frame-pointer)
  target_link_options(txmq_warnings INTERFACE -fsanitize=${TXMQ_SANITIZE})
  # Undefined behaviour stops the process at the first finding (halt_on_error), so a test
  # fails on it instead of printing a line nobody reads.
  if(TXMQ_SANITIZE MATCHES "undefined")
    target_compile_options(txmq_warnings INTERFACE -fno-sanitize-recover=undefined)
  endif()
endif()

# txmq_add_test(NAME LABEL SOURCES... [LIBS ...]): one gtest executable registered with ctest,
# every test case carrying LABEL so `ctest -L unit` selects a slice.
function(txmq_add_test name label)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main txmq::warnings)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS ${label} TIMEOUT ${ARG_TIMEOUT} DISCOVERY_TIMEOUT 60)
endfunction()
