# Every dependency is a Debian package (see ci/install-deps). A missing one fails configure:
# nothing is silently dropped.
find_package(PkgConfig REQUIRED)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(LZMA REQUIRED IMPORTED_TARGET liblzma)
pkg_check_modules(B2 REQUIRED IMPORTED_TARGET libb2)
pkg_check_modules(ARGON2 REQUIRED IMPORTED_TARGET libargon2)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(ISAL REQUIRED IMPORTED_TARGET libisal)
find_package(ZLIB REQUIRED)
find_package(OpenSSL 3 REQUIRED)
# msgpack-cxx is header-only; Debian's CMake config drags in Boost::boost, which we do not
# need (MSGPACK_NO_BOOST), so we only locate the header.
find_path(MSGPACK_CXX_INCLUDE_DIR msgpack.hpp REQUIRED)
add_library(borgcheck_msgpack INTERFACE)
add_library(borgcheck::msgpack ALIAS borgcheck_msgpack)
target_include_directories(borgcheck_msgpack INTERFACE ${MSGPACK_CXX_INCLUDE_DIR})
target_compile_definitions(borgcheck_msgpack INTERFACE MSGPACK_NO_BOOST)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(Threads REQUIRED)
