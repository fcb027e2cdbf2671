# Release hardening (STYLE.md section 7). Applied globally when KP_HARDEN is on.
if(KP_HARDEN)
    add_compile_options(-O2 -D_FORTIFY_SOURCE=3 -fstack-protector-strong
        -fstack-clash-protection -fcf-protection -fPIE)
    if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
        add_compile_options(-ftrivial-auto-var-init=zero -fzero-call-used-regs=used)
    endif()
    add_link_options(-pie -Wl,-z,relro,-z,now,-z,noexecstack)
endif()
