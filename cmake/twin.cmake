# tg_twin_library(NAME SOURCES... DEPS ...)
# Builds a library twice from the same sources: NAME computes in float32 (the product) and
# NAME64 in float64 (defines TG_DOUBLE; used by the gradient checks). A float64 target links the
# float64 twins of its DEPS, so a whole model can be compiled in double precision.
function(tg_twin_library name)
  cmake_parse_arguments(T "" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  foreach(v "" "64")
    add_library(${name}${v} STATIC ${T_SOURCES})
    target_include_directories(${name}${v} PUBLIC ${PROJECT_SOURCE_DIR})
    set(_deps "")
    foreach(d ${T_DEPS})
      list(APPEND _deps ${d}${v})
    endforeach()
    target_link_libraries(${name}${v} PUBLIC ${_deps} ${T_EXTERNAL})
    if(v STREQUAL "64")
      target_compile_definitions(${name}${v} PUBLIC TG_DOUBLE=1)
    endif()
  endforeach()
endfunction()
