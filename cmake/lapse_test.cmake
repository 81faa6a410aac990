# lapse_test(NAME SOURCES f.c... [LIBS lib...] [TIMEOUT s] [LABELS l...])
# One cmocka executable registered with ctest, with a timeout (default 60 s),
# so a hung test fails instead of hanging CI. Tests find the daemons through
# LAPSE_BIN_DIR and write scratch data under LAPSE_TEST_TMP.
function(lapse_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} dep_cmocka Threads::Threads)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "LAPSE_BIN_DIR=${CMAKE_BINARY_DIR}/bin;LAPSE_TEST_TMP=${CMAKE_BINARY_DIR}/test-tmp")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
