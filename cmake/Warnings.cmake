# The warning set of STYLE.md section 7. kp_warnings(<target>) applies it; kp_strict_conversion
# adds -Wconversion for the layers that promise it (base/, cmd/shim/).
set(KP_WARNINGS
    -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes -Wmissing-prototypes
    -Wold-style-definition -Wpointer-arith -Wwrite-strings -Wvla -Wundef -Wcast-qual
    -Wimplicit-fallthrough -Wnull-dereference -Wredundant-decls -fno-common)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    list(APPEND KP_WARNINGS -Wduplicated-cond -Wduplicated-branches -Wlogical-op
         -Wjump-misses-init)
endif()

function(kp_warnings target)
    target_compile_options(${target} PRIVATE ${KP_WARNINGS})
    if(KP_WERROR)
        target_compile_options(${target} PRIVATE -Werror)
    endif()
endfunction()

function(kp_strict_conversion target)
    target_compile_options(${target} PRIVATE -Wconversion -Wsign-conversion)
endfunction()

# Tests: the same set, less -Wnull-dereference. cmocka's assert_non_null() does not tell the
# compiler that the pointer is non-NULL afterwards, so optimised test builds (plain, release)
# warn on every dereference after an assertion; product code keeps the warning.
function(kp_test_warnings target)
    kp_warnings(${target})
    target_compile_options(${target} PRIVATE -Wno-null-dereference)
endfunction()
