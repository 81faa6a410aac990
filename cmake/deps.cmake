# Imported targets for the Debian packages Lapse uses (deploy/install-deps.sh
# installs them). One target per library, so a module's dependencies are
# visible in its CMakeLists.txt.
function(lapse_find_lib target header lib)
  find_path(${target}_INC ${header})
  find_library(${target}_LIB ${lib})
  if(NOT ${target}_INC OR NOT ${target}_LIB)
    message(FATAL_ERROR "${lib} not found (${header}): run deploy/install-deps.sh")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${${target}_INC}"
    INTERFACE_LINK_LIBRARIES "${${target}_LIB}")
endfunction()

lapse_find_lib(dep_nng nng/nng.h nng)
# The DynamoDB gateway's HTTP server (rpc/http_service.c).
lapse_find_lib(dep_microhttpd microhttpd.h microhttpd)
lapse_find_lib(dep_rocksdb rocksdb/c.h rocksdb)
# RocksDB linked statically (Debian's librocksdb.a, same package and version):
# in an executable the linker turns RocksDB's thread-local accesses (its perf
# context, read on every key comparison) into plain offsets instead of
# __tls_get_addr calls through the shared library, which took ~15% of a TTL
# sweep's CPU (docs/benchmarks.md). The libraries it needs come with
# librocksdb-dev.
option(LAPSE_ROCKSDB_STATIC "Link RocksDB statically" ON)
if(LAPSE_ROCKSDB_STATIC)
  find_library(LAPSE_ROCKSDB_ARCHIVE librocksdb.a)
  if(NOT LAPSE_ROCKSDB_ARCHIVE)
    message(FATAL_ERROR "librocksdb.a not found: run deploy/install-deps.sh, or -DLAPSE_ROCKSDB_STATIC=OFF")
  endif()
  set(rocksdb_libs "${LAPSE_ROCKSDB_ARCHIVE}")
  foreach(lib snappy z bz2 lz4 zstd gflags)
    find_library(LAPSE_ROCKSDB_DEP_${lib} ${lib})
    if(NOT LAPSE_ROCKSDB_DEP_${lib})
      message(FATAL_ERROR "lib${lib}, which librocksdb.a needs, not found: run deploy/install-deps.sh")
    endif()
    list(APPEND rocksdb_libs "${LAPSE_ROCKSDB_DEP_${lib}}")
  endforeach()
  list(APPEND rocksdb_libs stdc++ m Threads::Threads) # found by the compiler driver
  set_target_properties(dep_rocksdb PROPERTIES INTERFACE_LINK_LIBRARIES "${rocksdb_libs}")
endif()
lapse_find_lib(dep_protobufc protobuf-c/protobuf-c.h protobuf-c)
lapse_find_lib(dep_xxhash xxhash.h xxhash)
lapse_find_lib(dep_cmocka cmocka.h cmocka)
lapse_find_lib(dep_jansson jansson.h jansson)
lapse_find_lib(dep_curl curl/curl.h curl)
# OpenSSL's libcrypto: SHA-256 and HMAC for SigV4 (dynamodb/ddb_sigv4.c only).
lapse_find_lib(dep_crypto openssl/hmac.h crypto)

find_package(Threads REQUIRED)
find_program(PROTOC_C protoc-c REQUIRED)
