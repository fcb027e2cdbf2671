# kp_layer(<dir> DEPS <targets...>): a static library kp_<dir> (slashes become underscores)
# from every .c file under src/<dir>, sub-folders included (core/provisioning/*.c is part of
# kp_core), created only once the layer has sources. Layers do not nest (provider/ssh is a layer,
# provider is not). Each DEPS entry must be an existing
# target (an imported one such as PkgConfig::X included): a misspelt or not yet defined
# dependency fails the configure, since dropping it would only show up as link errors, or not at
# all. Layers register themselves in the global property KP_LIBS, highest layer first, which is
# the order a static link line needs. kp_warnings() (Warnings.cmake) and KP_BANNED_INCLUDE must
# be defined by the caller.
function(kp_layer dir)
    cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
    file(GLOB_RECURSE _srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.c)
    if(NOT _srcs)
        return()
    endif()
    string(REPLACE "/" "_" _lib "kp_${dir}")
    add_library(${_lib} STATIC ${_srcs})
    target_include_directories(${_lib} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_options(${_lib} PRIVATE ${KP_BANNED_INCLUDE})
    foreach(_d ${L_DEPS})
        if(NOT TARGET ${_d})
            message(FATAL_ERROR "kp_layer(${dir}): dependency '${_d}' is not a target "
                                "(misspelt, or a layer with no sources yet, or defined later)")
        endif()
        target_link_libraries(${_lib} PUBLIC ${_d})
    endforeach()
    kp_warnings(${_lib})
    get_property(_all GLOBAL PROPERTY KP_LIBS)
    set_property(GLOBAL PROPERTY KP_LIBS ${_lib} ${_all})
endfunction()
