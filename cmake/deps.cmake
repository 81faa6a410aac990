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
lapse_find_lib(dep_rocksdb rocksdb/c.h rocksdb)
lapse_find_lib(dep_protobufc protobuf-c/protobuf-c.h protobuf-c)
lapse_find_lib(dep_xxhash xxhash.h xxhash)
lapse_find_lib(dep_cmocka cmocka.h cmocka)
lapse_find_lib(dep_jansson jansson.h jansson)

find_package(Threads REQUIRED)
find_program(PROTOC_C protoc-c REQUIRED)
