# Integration and e2e tiers: tests that need the real control plane and sshd hosts of the test
# lab (tests/lab, binaries from tests/k8s-harness). They share one lab per ctest run through a
# fixture: lab/up brings up the control plane with KP_LAB_HOSTS hosts, lab/down removes all of
# it, and every test that requires the fixture runs in between. A test never starts the lab on
# its own, and never skips: if the lab cannot come up, lab/up fails and ctest reports every
# dependent test as failed ("Not Run" because its fixture failed), loudly.
#
# Tests are discovered by name, so adding one needs no edit here:
#   tests/integration/test-<name>.sh   script, label integration
#   tests/integration/test-<name>.c    cmocka binary linked with every layer, label integration
#   tests/e2e/t<NNN>-<name>.sh         script, label e2e
# Each gets KPSSH_LAB_DIR (source "$KPSSH_LAB_DIR/env.sh" for the variables tests/lab/README.md
# lists) and KP_REPO. Lab tests run one at a time (RESOURCE_LOCK lab): they share the hosts.

set(KP_LAB_ID 0 CACHE STRING "test lab instance (tests/lab/README.md: KPSSH_LAB_ID)")
set(KP_LAB_HOSTS 3 CACHE STRING "hosts the lab fixture brings up")
set(KP_LAB_DIR ${CMAKE_SOURCE_DIR}/_out/lab${KP_LAB_ID})
set(KP_LAB_ENV "KPSSH_LAB_ID=${KP_LAB_ID};KPSSH_LAB_DIR=${KP_LAB_DIR};KP_REPO=${CMAKE_SOURCE_DIR};KP_TEST_DATA_DIR=${CMAKE_SOURCE_DIR}/tests/data")

file(GLOB KP_INTEGRATION_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-*.sh)
file(GLOB KP_INTEGRATION_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/integration/test-*.c)
file(GLOB KP_E2E_SCRIPTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/e2e/t[0-9][0-9][0-9]-*.sh)

# The fixture carries the label of each tier that has tests, so `ctest -L <tier>` brings the
# lab up and down, and a tier with no tests of its own stays empty (and fails --no-tests=error).
set(_kp_lab_labels "")
if(KP_INTEGRATION_SCRIPTS OR KP_INTEGRATION_SOURCES)
    list(APPEND _kp_lab_labels integration)
endif()
if(KP_E2E_SCRIPTS)
    list(APPEND _kp_lab_labels e2e)
endif()
if(_kp_lab_labels)
    add_test(NAME lab/up COMMAND ${CMAKE_SOURCE_DIR}/tests/lab/up.sh --hosts ${KP_LAB_HOSTS})
    set_tests_properties(lab/up PROPERTIES FIXTURES_SETUP lab LABELS "${_kp_lab_labels}"
        RESOURCE_LOCK lab TIMEOUT 600 ENVIRONMENT "${KP_LAB_ENV}")
    add_test(NAME lab/down COMMAND ${CMAKE_SOURCE_DIR}/tests/lab/down.sh)
    set_tests_properties(lab/down PROPERTIES FIXTURES_CLEANUP lab LABELS "${_kp_lab_labels}"
        RESOURCE_LOCK lab TIMEOUT 300 ENVIRONMENT "${KP_LAB_ENV}")
endif()

function(kp_lab_test name labels timeout)
    math(EXPR _t "${timeout} * ${KP_TIMEOUT_MULT}")
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED lab RESOURCE_LOCK lab
        LABELS "${labels}" TIMEOUT ${_t} ENVIRONMENT "${KP_LAB_ENV}")
endfunction()

# A script test runs under timeout(1), which sends SIGTERM a minute before ctest's own timeout
# would kill it outright: the script's EXIT trap still runs, so it prints what it saw and takes
# its objects and hosts out of the lab, and the tests after it start clean. (A timed-out test
# left its Nodes and running kubelets behind, and every later test that counts Nodes failed.)
function(kp_lab_script name script labels timeout)
    math(EXPR _t "${timeout} * ${KP_TIMEOUT_MULT} - 60")
    add_test(NAME ${name} COMMAND timeout -k 30 ${_t} ${script})
    kp_lab_test(${name} "${labels}" ${timeout})
endfunction()

foreach(script ${KP_INTEGRATION_SCRIPTS})
    get_filename_component(name ${script} NAME_WE)
    string(REPLACE "test-" "" name ${name})
    # disruption-crash runs ten kill-and-converge rounds: about 8 minutes alone, 12 on a machine
    # that runs a second lab. drift rolls its pool seven times, 6 to 15 minutes.
    set(_timeout 900)
    if(name STREQUAL "disruption-crash")
        set(_timeout 1800)
    elseif(name STREQUAL "drift")
        set(_timeout 1200)
    endif()
    kp_lab_script(integration/${name} ${script} integration ${_timeout})
endforeach()

if(KP_INTEGRATION_SOURCES)
    add_library(kp_labtestlib STATIC ${CMAKE_CURRENT_SOURCE_DIR}/lib/kp-lab.c)
    target_link_libraries(kp_labtestlib PUBLIC kp_testlib ${KP_ALL_LIBS} ${CMOCKA_LIBRARY})
    target_compile_options(kp_labtestlib PRIVATE ${KP_BANNED_INCLUDE})
    kp_test_warnings(kp_labtestlib)
endif()

foreach(src ${KP_INTEGRATION_SOURCES})
    get_filename_component(name ${src} NAME_WE)
    string(REPLACE "test-" "itest-" bin ${name})
    string(REPLACE "test-" "" name ${name})
    add_executable(${bin} ${src})
    target_link_libraries(${bin} PRIVATE kp_labtestlib kp_testlib ${KP_ALL_LIBS}
                          ${CMOCKA_LIBRARY})
    target_compile_options(${bin} PRIVATE ${KP_BANNED_INCLUDE})
    kp_test_warnings(${bin})
    add_test(NAME integration/${name} COMMAND ${bin})
    kp_lab_test(integration/${name} integration 900)
endforeach()

foreach(script ${KP_E2E_SCRIPTS})
    get_filename_component(name ${script} NAME_WE)
    kp_lab_script(e2e/${name} ${script} e2e 1200)
endforeach()

# Tests that run the built kpssh-controller (integration/controller, crash, lease-hold,
# hung-host, crd-compat) or read its --help (integration/chart) get its path as
# KPSSH_CONTROLLER_BIN rather than guessing it from the working directory.
if(TARGET kpssh-controller)
    foreach(_t integration/controller integration/crash integration/chart integration/lease-hold
               integration/hung-host integration/crd-compat)
        if(TEST ${_t})
            set_property(TEST ${_t} APPEND PROPERTY ENVIRONMENT
                         "KPSSH_CONTROLLER_BIN=$<TARGET_FILE:kpssh-controller>")
        endif()
    endforeach()
endif()

# integration/crd-compat decodes what the API server serves with kpssh's own projections through
# tests/lib/kp-objcheck.c (kp_nodepool_decode / kp_nodeclaim_decode and their validators), given
# to it as KP_OBJCHECK_BIN.
if(TEST integration/crd-compat)
    add_executable(kp-objcheck ${CMAKE_CURRENT_SOURCE_DIR}/lib/kp-objcheck.c)
    target_link_libraries(kp-objcheck PRIVATE ${KP_ALL_LIBS})
    target_compile_options(kp-objcheck PRIVATE ${KP_BANNED_INCLUDE})
    kp_test_warnings(kp-objcheck)
    set_property(TEST integration/crd-compat APPEND PROPERTY ENVIRONMENT
                 "KP_OBJCHECK_BIN=$<TARGET_FILE:kp-objcheck>")
endif()
