# Precompiled headers: the third-party headers most of a target's sources include (the standard
# library, Boost.Outcome, the generated protobuf messages, Asio, Boost.JSON, RocksDB, GoogleTest),
# parsed once per target instead of once per source. In a cold build on 2 cores, parsing them
# was 40-70 % of a source's compile time (gcc -fsyntax-only against -c: 7.2 of 10.1 s for a
# cluster test, 9.3 of 14.1 s for broker/src/service/produce.cc), and a cold build is most of
# what CI's 45 minutes go to (README.md, Testing). Only headers from outside the project: ours
# change too often for a precompiled copy to pay. TXMQ_PCH=OFF builds without them.
option(TXMQ_PCH "Precompile the third-party headers most sources include" ON)

set(TXMQ_PCH_BASE
  <algorithm> <array> <atomic> <chrono> <cstdint> <cstring> <deque> <functional> <map> <memory>
  <mutex> <optional> <set> <span> <sstream> <string> <string_view> <system_error> <thread>
  <unordered_map> <unordered_set> <utility> <variant> <vector>
  <boost/outcome/basic_result.hpp> <boost/outcome/policy/base.hpp> <boost/outcome/success_failure.hpp>
  <boost/outcome/try.hpp>
  <txmq/v1/frame.pb.h>)
set(TXMQ_PCH_ASIO_CORE ${TXMQ_PCH_BASE}
  <boost/asio/any_io_executor.hpp> <boost/asio/awaitable.hpp> <boost/asio/co_spawn.hpp>
  <boost/asio/io_context.hpp> <boost/asio/ip/tcp.hpp> <boost/asio/post.hpp> <boost/asio/redirect_error.hpp>
  <boost/asio/steady_timer.hpp> <boost/asio/use_awaitable.hpp>)
set(TXMQ_PCH_ASIO ${TXMQ_PCH_ASIO_CORE} <boost/json/value.hpp>)
set(TXMQ_PCH_STORAGE ${TXMQ_PCH_BASE}
  <rocksdb/cache.h> <rocksdb/db.h> <rocksdb/env.h> <rocksdb/options.h> <rocksdb/write_batch.h>)
# Not Boost.JSON: its headers test BOOST_CONTAINER_DYN_LINK, which only the tests that link
# Boost::json define, and gcc refuses a precompiled header made with a different definition.
set(TXMQ_PCH_TEST ${TXMQ_PCH_ASIO_CORE} <gtest/gtest.h> <gmock/gmock.h>)

# txmq_precompile(TARGET KIND): TARGET's sources see the headers of KIND (BASE, ASIO,
# ASIO_CORE or STORAGE) precompiled. For targets of several sources only: making the header
# costs about one source's compile.
function(txmq_precompile target kind)
  if(TXMQ_PCH)
    target_precompile_headers(${target} PRIVATE ${TXMQ_PCH_${kind}})
  endif()
endfunction()

# Every test executable reuses one precompiled header, made by txmq_test_pch with the test
# flags (txmq_add_test). A test's own flags and definitions must match those for gcc to use
# it; when they do not, gcc parses the headers itself and says why in a -Winvalid-pch warning
# (CMake adds the flag to every source with a precompiled header).
function(txmq_make_test_pch)
  if(NOT TXMQ_PCH OR NOT TXMQ_BUILD_TESTS OR TXMQ_FUZZ)
    return()
  endif()
  # CONFIGURE, not WRITE: rewritten only when its text changes, so a re-run of cmake does not
  # recompile it.
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/txmq_test_pch.cc
       CONTENT "// The object that carries the tests' precompiled header.\n")
  add_library(txmq_test_pch OBJECT ${CMAKE_BINARY_DIR}/txmq_test_pch.cc)
  target_link_libraries(txmq_test_pch PRIVATE txmq::protocol RocksDB::rocksdb GTest::gtest GTest::gmock
                        txmq::warnings txmq::test_flags)
  target_precompile_headers(txmq_test_pch PRIVATE ${TXMQ_PCH_TEST})
endfunction()

function(txmq_reuse_test_pch target)
  if(TARGET txmq_test_pch)
    target_precompile_headers(${target} REUSE_FROM txmq_test_pch)
  endif()
endfunction()

# Unity builds: a library's sources compiled in batches, each batch one translation unit, so the
# headers and the template instantiations its sources share (Asio's coroutine machinery above
# all) are compiled once per batch instead of once per source. For the libraries whose sources
# share most of their includes; TXMQ_UNITY=OFF compiles every source alone (faster when
# iterating on one source of such a library).
option(TXMQ_UNITY "Compile the larger libraries' sources in batches (unity builds)" ON)
# Two gcc 12 warnings are false in a unity build: -Wsubobject-linkage, which gcc reports for a
# file-local type inside a linked one only when the file is #included (a coroutine's frame
# holding a lambda or a scope guard of a local type), and -Wmismatched-new-delete on Asio's
# coroutine frames, which allocate and free through their own operator new and delete (gcc PR
# 109224; the batches let gcc inline the allocation and not the release).
function(txmq_unity_build target)
  if(TXMQ_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    target_compile_options(${target} PRIVATE
                           $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage -Wno-mismatched-new-delete>)
  endif()
endfunction()
