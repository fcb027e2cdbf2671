# KP_SANITIZE is a comma list handed to -fsanitize= (dev: address,undefined; tsan: thread).
# Recovery is off so that the first report fails the test. KP_ANALYZE turns on gcc -fanalyzer.
if(KP_SANITIZE)
    add_compile_options(-fsanitize=${KP_SANITIZE} -fno-sanitize-recover=all
        -fno-omit-frame-pointer)
    add_link_options(-fsanitize=${KP_SANITIZE})
endif()
if(KP_ANALYZE)
    if(NOT CMAKE_C_COMPILER_ID STREQUAL "GNU")
        message(FATAL_ERROR "KP_ANALYZE needs gcc")
    endif()
    add_compile_options(-fanalyzer)
endif()

# Fuzzing: every library is instrumented for coverage, not just the drivers, or libFuzzer
# learns nothing about the parsers it is meant to explore. Drivers link the fuzzer runtime.
if(KP_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
endif()
