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

# Test code (not the libraries it tests) builds at -O1 -g1 in the RelWithDebInfo build: the
# test sources are 45 % of a cold build's compile time, and in a sample of 14 of them -O1 -g1
# took 31 % off it (105 s -> 72.5 s; -O2 -g -> -O1 -g1), minutes of a cold 2-core CI run. Line
# tables stay, so a failure's backtrace still names file and line; the code under test keeps
# the release flags, so the tests exercise what ships.
add_library(txmq_test_flags INTERFACE)
add_library(txmq::test_flags ALIAS txmq_test_flags)
target_compile_options(txmq_test_flags INTERFACE $<$<CONFIG:RelWithDebInfo>:-O1 -g1>)

# txmq_add_test(NAME LABEL SOURCES... [LIBS ...] [TIMEOUT s] [RUN_SERIAL]): one gtest executable
# registered with ctest, every test case carrying LABEL so `ctest -L unit` selects a slice.
# RUN_SERIAL: ctest -j runs nothing beside its cases (for a test that measures latency).
function(txmq_add_test name label)
  cmake_parse_arguments(ARG "RUN_SERIAL" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main txmq::warnings
                        txmq::test_flags)
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  txmq_reuse_test_pch(${name})
  set(serial)
  if(ARG_RUN_SERIAL)
    set(serial RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS ${label} TIMEOUT ${ARG_TIMEOUT} ${serial} DISCOVERY_TIMEOUT 60)
endfunction()

# txmq_use_tcmalloc(TARGET): links gperftools' tcmalloc_minimal (Debian libgoogle-perftools-dev,
# installed by scripts/setup.sh) as the executable's allocator. glibc's malloc/free were half of
# the broker's io thread with one message per request and a third of txmq-relay's samples
# (objects allocated on one thread and freed on another); tcmalloc's per-thread caches took
# 7-13 % off the broker's CPU per message in an A/B of the same binary (docs/BENCHMARKS.md,
# issue #15). Not under the sanitizers, which bring their own allocator; without the library
# the executable keeps glibc's malloc.
find_library(TXMQ_TCMALLOC NAMES tcmalloc_minimal)
function(txmq_use_tcmalloc target)
  if(TXMQ_FUZZ OR TXMQ_SANITIZE)
    return()
  endif()
  if(TXMQ_TCMALLOC)
    target_link_libraries(${target} PRIVATE ${TXMQ_TCMALLOC})
  else()
    message(WARNING "libtcmalloc_minimal not found (Debian: libgoogle-perftools-dev): ${target} uses glibc's malloc")
  endif()
endfunction()
