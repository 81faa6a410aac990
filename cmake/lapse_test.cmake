# lapse_test(NAME SOURCES f.c... [LIBS lib...] [TIMEOUT s] [LABELS l...])
# One cmocka executable registered with ctest, with a timeout (default 60 s),
# so a hung test fails instead of hanging CI. Tests find the daemons through
# LAPSE_BIN_DIR and write scratch data under LAPSE_TEST_TMP.
#
# cmocka counts a skipped test as passed; cmocka_skip.c (linked into each)
# makes an executable whose tests skipped exit 77, ctest's "Skipped". A test
# that may skip where CI runs (it needs what deploy/install-deps.sh cannot
# give: root, network namespaces, a working systemd) carries the label
# may-skip; `make test` fails on any other skip (cmake/check-skips.sh).
function(lapse_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  lapse_cmocka_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} Threads::Threads)
  lapse_test_with(${name} ${name} TIMEOUT ${T_TIMEOUT} LABELS ${T_LABELS})
endfunction()

# lapse_test_with(NAME BASE TIMEOUT s LABELS l... ENV VAR=value...): BASE's
# executable registered again as NAME, with extra environment: a transport or
# mode that is off by default still runs its share of the tests.
function(lapse_test_with name base)
  cmake_parse_arguments(T "" "TIMEOUT" "LABELS;ENV" ${ARGN})
  set(env "LAPSE_BIN_DIR=${CMAKE_BINARY_DIR}/bin;LAPSE_TEST_TMP=${CMAKE_BINARY_DIR}/test-tmp")
  if(T_ENV)
    list(APPEND env ${T_ENV})
  endif()
  add_test(NAME ${name} COMMAND ${base})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    ENVIRONMENT "${env}")
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# lapse_cmocka_executable(NAME f.c...): a cmocka executable whose skips exit 77
# (cmocka_skip.c), not registered with ctest.
function(lapse_cmocka_executable name)
  add_executable(${name} ${ARGN})
  if(NOT TARGET lapse_cmocka_skip)
    add_library(lapse_cmocka_skip OBJECT ${PROJECT_SOURCE_DIR}/cmake/cmocka_skip.c)
    target_link_libraries(lapse_cmocka_skip PRIVATE dep_cmocka)
  endif()
  target_sources(${name} PRIVATE $<TARGET_OBJECTS:lapse_cmocka_skip>)
  target_link_libraries(${name} PRIVATE dep_cmocka)
  target_link_options(${name} PRIVATE -Wl,--wrap=_skip,--wrap=_cmocka_run_group_tests)
endfunction()
