# Compile options shared by every borgcheck target, applied per target through
# borgcheck_target_defaults() so that sanitizer and warning flags never leak into
# CMAKE_CXX_FLAGS.

add_library(borgcheck_defaults INTERFACE)
add_library(borgcheck::defaults ALIAS borgcheck_defaults)
target_compile_options(borgcheck_defaults INTERFACE -Wall -Wextra)
target_compile_features(borgcheck_defaults INTERFACE cxx_std_20)
if(BORGCHECK_SANITIZE)
  target_compile_options(borgcheck_defaults INTERFACE -fsanitize=${BORGCHECK_SANITIZE}
                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(borgcheck_defaults INTERFACE -fsanitize=${BORGCHECK_SANITIZE})
endif()
if(BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH)
  if(CMAKE_BUILD_TYPE STREQUAL "Release" OR CMAKE_BUILD_TYPE STREQUAL "MinSizeRel")
    message(FATAL_ERROR "BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH must never be set in a Release build")
  endif()
  # Only a libFuzzer build may skip authentication (docs/fuzzing.md); ci/fuzz-smoke proves it.
  if(NOT BORGCHECK_BUILD_FUZZERS)
    message(FATAL_ERROR "BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH is only allowed with BORGCHECK_BUILD_FUZZERS=ON")
  endif()
  target_compile_definitions(borgcheck_defaults INTERFACE BORGCHECK_FUZZING_UNSAFE_SKIP_AUTH=1)
endif()
# libFuzzer builds (clang only): coverage instrumentation and ASan/UBSan on every target, so
# that the fuzzers see into the libraries; fuzz/CMakeLists.txt links the fuzzer main.
if(BORGCHECK_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "BORGCHECK_BUILD_FUZZERS needs clang (libFuzzer); use the 'fuzz' preset")
  endif()
  target_compile_options(borgcheck_defaults INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(borgcheck_defaults INTERFACE -fsanitize=address,undefined)
endif()

# borgcheck_library(NAME ALIAS sources...): one static library per folder.
function(borgcheck_library name alias)
  add_library(${name} STATIC ${ARGN})
  add_library(${alias} ALIAS ${name})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC borgcheck::defaults)
endfunction()

# g++ 12 at -O2/-O3 (the release preset) reports -Wrestrict, -Warray-bounds and
# -Wmismatched-new-delete inside libstdc++ for `"literal" + std::string` and
# std::vector::insert inlined into test code (g++ 12's known false positives there), and for the
# counting operator new/delete of fuzz/bounds_test.cc (malloc-based by design). The libraries
# and the binary compile clean; only the test targets named here get these three off, and
# only with g++ before 13. Nothing in the Debug (CI, -Werror) or clang builds changes.
function(borgcheck_gcc12_test_false_positives target)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict -Wno-array-bounds -Wno-mismatched-new-delete)
  endif()
endfunction()

# borgcheck_test(NAME sources... LIBS libs...): a Catch2 test binary registered with CTest.
function(borgcheck_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} borgcheck_catch_main Catch2::Catch2 borgcheck::defaults)
  target_compile_definitions(${name} PRIVATE
    BORGCHECK_SHARED_DIR="${BORGCHECK_SHARED_DIR}"
    BORGCHECK_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  set(labels unit)
  if(T_LABELS)
    set(labels ${T_LABELS})
  endif()
  # Which test binaries carry each label, so a gate can build just those (ci/tsan builds the
  # `concurrency` and `cli` ones: see tests/concurrency/CMakeLists.txt).
  foreach(label IN LISTS labels)
    set_property(GLOBAL APPEND PROPERTY BORGCHECK_TEST_TARGETS_${label} ${name})
  endforeach()
  # Catch2 v2's discovery flattens PROPERTIES into one list, so a multi-label value would
  # arrive broken; set labels and environment on the discovered tests from an include file
  # that runs after Catch has defined <name>_TESTS.
  # --warn NoTests: a CTest entry whose filter matches no test case fails instead of passing
  # empty (a ';' in a TEST_CASE name splits it into names that match nothing, and a '\' is an
  # escape in a Catch filter: sixteen tests went unrun that way until 2026-12-07).
  catch_discover_tests(${name} TEST_LIST ${name}_TESTS EXTRA_ARGS --warn NoTests)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake"
       "if(DEFINED ${name}_TESTS)\n"
       "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${labels}\"\n"
       "    ENVIRONMENT \"BORGCHECK_SHARED_DIR=${BORGCHECK_SHARED_DIR}\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
               "${CMAKE_CURRENT_BINARY_DIR}/${name}_properties.cmake")
endfunction()

get_filename_component(_shared "${PROJECT_SOURCE_DIR}/../shared" ABSOLUTE)
set(BORGCHECK_SHARED_DIR "${_shared}" CACHE PATH "The shared/ folder with spec and fixtures")
